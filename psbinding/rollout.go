package psbinding

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/duck"
)

// The annotations a Binding's author or user sets to pace its rollout,
// overriding Settings.Rollout for that Binding.
const (
	// RolloutMaxChangingAnnotation bounds the subjects changing at once: a
	// count ("10") or a percentage of the subjects ("25%", rounded up, at
	// least 1). "0" or "off" turns the policy off for the Binding.
	RolloutMaxChangingAnnotation = "rollout.bindings.bindkit.dev/max-changing"
	// RolloutDeadlineAnnotation is how long a subject may take to roll out
	// (a Go duration, "5m") before the rollout halts.
	RolloutDeadlineAnnotation = "rollout.bindings.bindkit.dev/deadline"
	// RolloutRollbackAnnotation, "true", rolls a halted wave back to the
	// subjects' previous templates.
	RolloutRollbackAnnotation = "rollout.bindings.bindkit.dev/rollback"
	// RolloutPaceDeletionAnnotation, "true", paces the unbinding of a
	// Binding being deleted like any other change (RolloutPolicy.PaceDeletion).
	RolloutPaceDeletionAnnotation = "rollout.bindings.bindkit.dev/pace-deletion"
)

// The records the reconciler keeps on subjects under a rollout policy
// (see package duck): each paced change (RolloutAnnotation), how to take
// it back (RollbackAnnotation), and the holds a halted rollout leaves
// (HeldAnnotation). Each is written in the patch that makes the change it
// describes, one entry per Binding.
const (
	RolloutAnnotation  = duck.RolloutAnnotation
	RollbackAnnotation = duck.RollbackAnnotation
	HeldAnnotation     = duck.HeldAnnotation
)

// Ready reasons of a Binding paced by a rollout policy.
const (
	// ReasonRollingOut: subjects are being changed wave by wave; the
	// message counts them.
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutHalted: a subject did not roll out in time; no further
	// subject is changed until the Binding changes. The message names the
	// subjects.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutPolicyInvalid: a rollout annotation cannot be read.
	ReasonRolloutPolicyInvalid = "RolloutPolicyInvalid"
)

// Defaults of a RolloutPolicy.
const (
	DefaultRolloutDeadline = 10 * time.Minute
	DefaultRolloutQuiet    = 2 * time.Second
	// rolloutRecheck is how often a rollout in progress is looked at again
	// besides its subjects' events: deadlines pass without events.
	rolloutRecheck = 2 * time.Second
)

// RolloutPolicy paces how a Binding's change (created, edited, deleted)
// reaches its subjects: at most MaxChanging subjects have a changed pod
// template that has not rolled out yet; a subject that takes longer than
// Deadline (or whose Deployment reports ProgressDeadlineExceeded) halts
// the rollout, and with Rollback its wave is rolled back. Edits that
// arrive within Quiet of one another are rolled out once, as the last.
// The zero value (MaxChanging zero) is no policy: every subject is
// patched at once.
type RolloutPolicy struct {
	// MaxChanging is a count or a percentage of the selected subjects.
	MaxChanging intstr.IntOrString
	// Deadline defaults to DefaultRolloutDeadline.
	Deadline time.Duration
	// Rollback rolls a halted wave back.
	Rollback bool
	// Quiet defaults to DefaultRolloutQuiet.
	Quiet time.Duration
	// PaceDeletion paces the unbinding of a Binding being deleted like any
	// other change, in health-gated waves; its finalizer keeps it until
	// the last wave has rolled out. Off by default: deleting a Binding is
	// usually the remedy, wanted at once. A halt stops the unbinding (the
	// Binding stays, being deleted, until it is fixed by hand, e.g. by
	// turning the policy off with RolloutMaxChangingAnnotation "off"); it
	// never rolls an unbinding back.
	PaceDeletion bool
}

// Enabled reports whether p paces anything.
func (p RolloutPolicy) Enabled() bool {
	if p.MaxChanging.Type == intstr.String {
		return p.MaxChanging.StrVal != "" && p.MaxChanging.StrVal != "0%"
	}
	return p.MaxChanging.IntVal > 0
}

// max is how many of total subjects may change at once: at least one.
func (p RolloutPolicy) max(total int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&p.MaxChanging, total, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Validate reports a policy that cannot work, naming the field.
func (p RolloutPolicy) Validate() error {
	var errs []error
	if p.MaxChanging.Type == intstr.String && p.MaxChanging.StrVal != "" {
		if _, err := intstr.GetScaledValueFromIntOrPercent(&p.MaxChanging, 100, true); err != nil || !strings.HasSuffix(p.MaxChanging.StrVal, "%") {
			errs = append(errs, fmt.Errorf("MaxChanging %q: want a count or a percentage such as 25%%", p.MaxChanging.StrVal))
		}
	}
	if p.MaxChanging.Type == intstr.Int && p.MaxChanging.IntVal < 0 {
		errs = append(errs, fmt.Errorf("MaxChanging %d: must not be negative", p.MaxChanging.IntVal))
	}
	if p.Deadline < 0 || p.Quiet < 0 {
		errs = append(errs, fmt.Errorf("Deadline %v, Quiet %v: must not be negative", p.Deadline, p.Quiet))
	}
	return errors.Join(errs...)
}

// rolloutPolicy is b's policy: Settings.Rollout with b's annotations over
// it, defaults filled in.
func (s *Settings) rolloutPolicy(b Bindable) (RolloutPolicy, error) {
	var p RolloutPolicy
	if s.Rollout != nil {
		p = *s.Rollout
	}
	ann := b.GetAnnotations()
	var errs []error
	if v, ok := ann[RolloutMaxChangingAnnotation]; ok {
		switch v = strings.TrimSpace(v); {
		case v == "off" || v == "0":
			p.MaxChanging = intstr.IntOrString{}
		case strings.HasSuffix(v, "%"):
			p.MaxChanging = intstr.FromString(v)
		default:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("annotation %s %q: want a count, a percentage such as 25%%, or off", RolloutMaxChangingAnnotation, v))
			}
			p.MaxChanging = intstr.FromInt32(int32(min(max(n, 0), 1<<30)))
		}
	}
	if v, ok := ann[RolloutDeadlineAnnotation]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("annotation %s %q: want a positive duration such as 5m", RolloutDeadlineAnnotation, v))
		}
		p.Deadline = d
	}
	for _, flag := range []struct {
		annotation string
		field      *bool
	}{{RolloutRollbackAnnotation, &p.Rollback}, {RolloutPaceDeletionAnnotation, &p.PaceDeletion}} {
		v, ok := ann[flag.annotation]
		if !ok {
			continue
		}
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s %q: want true or false", flag.annotation, v))
		}
		*flag.field = on
	}
	if err := p.Validate(); err != nil {
		errs = append(errs, err)
	}
	if p.Deadline == 0 {
		p.Deadline = DefaultRolloutDeadline
	}
	if p.Quiet == 0 {
		p.Quiet = DefaultRolloutQuiet
	}
	return p, errors.Join(errs...)
}
