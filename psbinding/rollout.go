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

// The annotations through which an operator steers a Binding's rollout
// (kubectl bindkit rollout pause|resume|undo sets them). Either one
// paces the Binding under its policy, or, without one, in one wave of
// every subject.
const (
	// RolloutPausedAnnotation, "true", pauses the Binding's rollout: no
	// wave starts (one in flight is watched to its end, and may halt),
	// admission gives a subject that does not carry the Binding's
	// generation nothing of it, and the status publishes the plan, what
	// resuming would do (duck.PlanStatus). A Binding created or edited
	// paused changes no subject until it is resumed: removed, or "false".
	RolloutPausedAnnotation = "rollout.bindings.bindkit.dev/paused"
	// RolloutUndoAnnotation, set to the Binding's generation, undoes that
	// generation: its subjects are brought back, in waves under the
	// policy, to the newest earlier generation whose rollout completed
	// (RolloutHistoryAnnotation): the undone generation's Undo, then the
	// restored one's Do. It holds while the Binding is at that generation;
	// an edit (a new generation) rolls out as usual.
	RolloutUndoAnnotation = "rollout.bindings.bindkit.dev/undo"
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
	// ReasonRolloutPaused: the rollout is paused (RolloutPausedAnnotation);
	// the message says how far it went, and status.plan what resuming
	// does.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRolloutResumed is the reason of the event of a resumed
	// rollout.
	ReasonRolloutResumed = "RolloutResumed"
	// ReasonRolloutPlanned is the reason of the event of a paused
	// Binding's plan, published for a new generation.
	ReasonRolloutPlanned = "RolloutPlanned"
	// ReasonUndoingRollout: the subjects are being brought back, wave by
	// wave, to the last generation that rolled out completely.
	ReasonUndoingRollout = "UndoingRollout"
	// ReasonRolloutUndone: every subject carries the generation the undo
	// restored; the Binding's own generation reaches none until it is
	// edited or the undo is taken back.
	ReasonRolloutUndone = "RolloutUndone"
	// ReasonUndoUnavailable: an undo was asked for, but no earlier
	// generation's complete rollout is recorded; nothing is changed.
	ReasonUndoUnavailable = "UndoUnavailable"
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
	paused, undo, err := controlsOf(b)
	if err != nil {
		errs = append(errs, err)
	}
	if (paused || undo) && !p.Enabled() {
		p.MaxChanging = intstr.FromString("100%") // one wave of every subject
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

// controlsOf reads an operator's controls of b's rollout: whether it is
// paused (RolloutPausedAnnotation "true"), and whether its generation is
// being undone (RolloutUndoAnnotation naming it). A value it cannot read
// is an error naming the annotation, and counts as not set, as the
// admission policy reads it.
func controlsOf(b Bindable) (paused, undo bool, _ error) {
	ann := b.GetAnnotations()
	var errs []error
	if v, ok := ann[RolloutPausedAnnotation]; ok {
		switch strings.TrimSpace(v) {
		case "true":
			paused = true
		case "false", "":
		default:
			errs = append(errs, fmt.Errorf("annotation %s %q: want true or false", RolloutPausedAnnotation, v))
		}
	}
	if v, ok := ann[RolloutUndoAnnotation]; ok {
		v = strings.TrimSpace(v)
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			errs = append(errs, fmt.Errorf("annotation %s %q: want the generation to undo", RolloutUndoAnnotation, v))
		}
		undo = v == strconv.FormatInt(b.GetGeneration(), 10)
	}
	return paused, undo, errors.Join(errs...)
}
