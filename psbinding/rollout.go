package psbinding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/controller"
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
)

// The annotations the reconciler writes on subjects under a rollout
// policy. The subjects changing are recorded in the Binding's status
// (duck.RolloutStatus.Changing), not on them: an annotation written to
// a Deployment, and cleared afterwards, would bump its generation twice.
const (
	// RollbackAnnotation holds, under a policy that rolls back, what gives
	// the subject back the template and bound record it had before the
	// Binding's generation changed it: "<resource>.<group>/<name>:<generation>"
	// and the JSON patch, space-separated. It is written in the patch that
	// changes the subject, and left there once the subject rolled out (the
	// next rollout's replaces it).
	RollbackAnnotation = "bindings.bindkit.dev/rollback"
	// HeldAnnotation is set on a subject rolled back from a halted
	// rollout: "<resource>.<group>/<name>:<generation>". Admission (the
	// webhook and the policy) does not apply that generation of that
	// Binding to it, so an update by anyone else does not undo the
	// rollback; the Binding's next generation, rolled out, removes it.
	HeldAnnotation = "bindings.bindkit.dev/held"
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
	if v, ok := ann[RolloutRollbackAnnotation]; ok {
		rb, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s %q: want true or false", RolloutRollbackAnnotation, v))
		}
		p.Rollback = rb
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

// rollingOut is a reconcile that paced its subjects: the Binding is not
// Ready yet, and is looked at again after retry.
type rollingOut struct {
	reason, message string
	retry           time.Duration
}

func (e *rollingOut) Error() string { return e.message }

// generations remembers, per Binding, when the reconciler first saw its
// current generation, for RolloutPolicy.Quiet.
type generations struct {
	mu   sync.Mutex
	seen map[types.UID]seenGeneration
}

type seenGeneration struct {
	generation int64
	at         time.Time
	// rollout is the rollout this process last computed for the Binding:
	// the status the next reconcile reads from the cache may not show it
	// yet, and a stale one would bring back subjects rolled back since,
	// or forget a halt.
	rollout *duck.RolloutStatus
}

// rolloutOf returns the rollout of b this process last computed, nil if
// none.
func (g *generations) rolloutOf(b Bindable) *duck.RolloutStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return copyRollout(g.seen[b.GetUID()].rollout)
}

// copyRollout copies ro, nil for nil.
func copyRollout(ro *duck.RolloutStatus) *duck.RolloutStatus {
	if ro == nil {
		return nil
	}
	c := *ro
	c.Changing, c.Halted = slices.Clone(ro.Changing), slices.Clone(ro.Halted)
	return &c
}

// setRollout records the rollout of b this process computed.
func (g *generations) setRollout(b Bindable, ro *duck.RolloutStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[types.UID]seenGeneration{}
	}
	s := g.seen[b.GetUID()]
	s.rollout = copyRollout(ro)
	g.seen[b.GetUID()] = s
}

// mergeChanging is every subject of the lists, once, as last patched
// (the newest generation, then the latest time), sorted by name.
func mergeChanging(lists ...[]duck.ChangingSubject) []duck.ChangingSubject {
	byName := map[string]duck.ChangingSubject{}
	for _, list := range lists {
		for _, c := range list {
			if o, ok := byName[c.Name]; !ok || c.Generation > o.Generation || (c.Generation == o.Generation && o.Since.Before(&c.Since)) {
				byName[c.Name] = c
			}
		}
	}
	out := slices.Collect(maps.Values(byName))
	slices.SortFunc(out, func(a, b duck.ChangingSubject) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// quietFor returns how much longer b's generation must stay unchanged
// before it is rolled out.
func (g *generations) quietFor(b Bindable, quiet time.Duration, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[types.UID]seenGeneration{}
	}
	s, ok := g.seen[b.GetUID()]
	if !ok || s.generation != b.GetGeneration() {
		s = seenGeneration{generation: b.GetGeneration(), at: now, rollout: s.rollout}
		if !ok && b.GetGeneration() == 1 {
			// A new Binding has had no edit to wait for.
			s.at = now.Add(-quiet)
		}
		g.seen[b.GetUID()] = s
	}
	return max(0, s.at.Add(quiet).Sub(now))
}

// pace applies policy to one reconcile of b's subjects: it reads live
// the subjects b changed that have not rolled out yet (from this process's
// memory and b's status), halts (and rolls back) on one that failed, and
// returns the part of todo to patch now (the next wave, each marked to be
// recorded) or a *rollingOut to report. inForce counts the selected
// subjects that record b at its generation; total the selected ones.
func (r *BaseReconciler) pace(ctx context.Context, b Bindable, s *subject, policy RolloutPolicy, todo []work, inForce, total int) ([]work, error) {
	rec, ok := b.GetBindingStatus().(duck.RolloutRecorder)
	if !ok {
		err := fmt.Errorf("%s: a rollout policy needs a status that records a rollout (embed duck.Status)", describe(b))
		return nil, unavailable(ReasonRolloutPolicyInvalid, err, controller.NewPermanentError(err))
	}
	now := time.Now()
	prev := rec.GetRollout()
	if mine := r.generations.rolloutOf(b); mine != nil {
		// This process's last word is newer than the cached status.
		prev = mine
	}
	ro := &duck.RolloutStatus{Generation: b.GetGeneration()}
	if prev != nil && prev.Generation == b.GetGeneration() {
		ro.Wave, ro.Halted = prev.Wave, slices.Clone(prev.Halted)
	}
	var changing []duck.ChangingSubject
	if prev != nil {
		changing = mergeChanging(prev.Changing)
	}
	defer func() {
		rec.SetRollout(ro)
		r.generations.setRollout(b, ro)
	}()

	// The subjects still changing, and those that failed.
	var still []duck.ChangingSubject
	failed := map[string]string{}
	var superseded []string // changing to an earlier generation: patched again in a wave
	for _, c := range changing {
		done, failure, err := r.rolloutState(ctx, s, c.Name, c.Since.Time, policy.Deadline, now)
		switch {
		case err != nil:
			return nil, err
		case done:
		case c.Generation != b.GetGeneration():
			// Rolling out a superseded generation: it takes a slot until
			// the wave that patches it to this one, and cannot halt this
			// generation's rollout.
			still = append(still, c)
			superseded = append(superseded, c.Name)
		case failure != "":
			failed[c.Name] = failure
			still = append(still, c)
		default:
			still = append(still, c)
		}
	}
	ro.Total = total
	ro.Changing = still
	ro.Updated = max(0, inForce-len(still))
	if len(failed) > 0 && len(ro.Halted) == 0 {
		// The rollout halts as a whole: every subject still changing to
		// this generation is halted (and rolled back) with the ones that
		// failed, not only those whose failure showed first. Their
		// Deployments report ProgressDeadlineExceeded one at a time, and
		// the first report reconciles the Binding.
		for _, c := range still {
			if c.Generation == b.GetGeneration() {
				ro.Halted = append(ro.Halted, c.Name)
			}
		}
		slices.Sort(ro.Halted)
		ro.Halted = slices.Compact(ro.Halted)
		var why []string
		for _, name := range ro.Halted {
			reason, ok := failed[name]
			if !ok {
				reason = "halted with its wave"
			}
			why = append(why, name+": "+reason)
		}
		msg := fmt.Sprintf("rollout of generation %d halted at wave %d: %s", b.GetGeneration(), ro.Wave, strings.Join(why, "; "))
		if policy.Rollback {
			key := r.boundBy(b).String() + ":" + strconv.FormatInt(b.GetGeneration(), 10)
			var rolledBack []string
			for _, c := range still {
				if err := r.rollBack(ctx, s, c.Name, key); err != nil {
					msg += fmt.Sprintf("; rollback of %s failed: %v", c.Name, err)
					continue
				}
				rolledBack = append(rolledBack, c.Name)
			}
			if len(rolledBack) > 0 {
				msg += "; rolled back " + strings.Join(rolledBack, ", ")
				rolloutObserverOf(r.observerIn(ctx)).RolloutRolledBack(r.GVR.GroupResource(), len(rolledBack))
			}
			ro.Changing = slices.DeleteFunc(ro.Changing, func(c duck.ChangingSubject) bool { return slices.Contains(rolledBack, c.Name) })
		}
		rolloutObserverOf(r.observerIn(ctx)).RolloutHalted(r.GVR.GroupResource())
		if r.Recorder != nil {
			r.Recorder.Event(b, corev1.EventTypeWarning, ReasonRolloutHalted, msg)
		}
		return nil, &rollingOut{reason: ReasonRolloutHalted, message: msg}
	}
	if len(ro.Halted) > 0 {
		// Halted at this generation: nothing more until the Binding
		// changes, but a rollback that failed is tried again.
		if policy.Rollback {
			key := r.boundBy(b).String() + ":" + strconv.FormatInt(b.GetGeneration(), 10)
			for _, c := range ro.Changing {
				if slices.Contains(ro.Halted, c.Name) && c.Generation == b.GetGeneration() && r.rollBack(ctx, s, c.Name, key) == nil {
					ro.Changing = slices.DeleteFunc(ro.Changing, func(x duck.ChangingSubject) bool { return x.Name == c.Name })
				}
			}
		}
		return nil, &rollingOut{reason: ReasonRolloutHalted, message: haltedMessage(b, ro)}
	}
	if wait := r.generations.quietFor(b, policy.Quiet, now); wait > 0 && len(todo) > 0 {
		return nil, &rollingOut{reason: ReasonRollingOut, retry: wait,
			message: fmt.Sprintf("generation %d: waiting %v for edits to settle before rolling out", b.GetGeneration(), wait.Round(time.Millisecond))}
	}
	// A subject still changing (patched for an earlier generation) waits
	// for its rollout before it is patched again.
	todo = slices.DeleteFunc(todo, func(w work) bool {
		return !slices.Contains(superseded, w.name) && slices.ContainsFunc(still, func(c duck.ChangingSubject) bool { return c.Name == w.name })
	})
	// Superseded subjects first: their slots are taken already.
	slices.SortStableFunc(todo, func(a, b work) int {
		return boolOrder(!slices.Contains(superseded, a.name), !slices.Contains(superseded, b.name))
	})
	allowed := policy.max(total) - len(still) + countIn(todo, superseded, policy.max(total))
	if allowed <= 0 || len(todo) == 0 {
		if len(still) == 0 && len(todo) == 0 {
			return nil, nil // rolled out
		}
		return nil, &rollingOut{reason: ReasonRollingOut, retry: rolloutRecheck, message: progress(b, ro, len(todo))}
	}
	wave := todo[:min(allowed, len(todo))]
	key := r.boundBy(b).String() + ":" + strconv.FormatInt(b.GetGeneration(), 10)
	since := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range wave {
		wave[i].paced = true
		if policy.Rollback {
			wave[i].rollbackKey = key
		}
		ro.Changing = append(ro.Changing, duck.ChangingSubject{Name: wave[i].name, Since: since, Generation: b.GetGeneration()})
	}
	ro.Changing = mergeChanging(ro.Changing)
	ro.Wave++
	rolloutObserverOf(r.observerIn(ctx)).RolloutWave(r.GVR.GroupResource())
	return wave, &rollingOut{reason: ReasonRollingOut, retry: rolloutRecheck, message: progress(b, ro, len(todo)-len(wave))}
}

// boolOrder orders false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// countIn counts the work of todo on subjects named in names, at most
// limit: the superseded subjects a wave may patch again without taking
// another slot.
func countIn(todo []work, names []string, limit int) int {
	n := 0
	for _, w := range todo {
		if slices.Contains(names, w.name) {
			n++
		}
	}
	return min(n, limit)
}

// haltedMessage is the message of a halted rollout, as recorded.
func haltedMessage(b Bindable, ro *duck.RolloutStatus) string {
	if c := lastReady(b); c != nil && c.Reason == ReasonRolloutHalted {
		return c.Message
	}
	// The cached Binding does not show the halt's condition yet.
	return fmt.Sprintf("rollout of generation %d halted at wave %d: %s", b.GetGeneration(), ro.Wave, strings.Join(ro.Halted, ", "))
}

// lastReady is b's Ready condition as last written.
func lastReady(b Bindable) *metav1.Condition {
	for _, c := range b.GetBindingStatus().GetConditions() {
		if c.Type == duck.ConditionReady {
			return &c
		}
	}
	return nil
}

// progress says how far the rollout of b is.
func progress(b Bindable, ro *duck.RolloutStatus, left int) string {
	return fmt.Sprintf("rolling out generation %d: %d of %d subjects updated, %d changing, %d to go, wave %d",
		b.GetGeneration(), ro.Updated, ro.Total, len(ro.Changing), left, ro.Wave)
}

// rolloutState reads subject name in full and says whether its rollout is
// complete, or why it failed: its Deployment reports
// ProgressDeadlineExceeded, or deadline has passed since the reconciler
// changed it.
func (r *BaseReconciler) rolloutState(ctx context.Context, s *subject, name string, since time.Time, deadline time.Duration, now time.Time) (done bool, failure string, _ error) {
	u, err := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("subject %s %s/%s: read its rollout: %w", s.gvr.GroupResource(), s.ref.Namespace, name, err)
	}
	if complete, failed := RolledOut(u); complete {
		return true, "", nil
	} else if failed != "" {
		return false, failed, nil
	}
	if now.Sub(since) > deadline {
		return false, fmt.Sprintf("not rolled out within %v", deadline), nil
	}
	return false, "", nil
}

// RolledOut reads a workload's rollout from its status: complete once its
// controller has observed the current generation and every replica is
// updated and available (Deployment, StatefulSet, DaemonSet); failed, with
// the reason, when a Deployment reports ProgressDeadlineExceeded. Kinds
// without a rollout status are complete.
func RolledOut(u *unstructured.Unstructured) (complete bool, failed string) {
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	num := func(m map[string]any, field string) int64 {
		v, _, _ := unstructured.NestedInt64(m, field)
		return v
	}
	observed := num(status, "observedGeneration") >= u.GetGeneration()
	replicas := int64(1)
	if v, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found {
		replicas = v
	}
	switch u.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps":
		conds, _, _ := unstructured.NestedSlice(status, "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded" {
				return false, "ProgressDeadlineExceeded"
			}
		}
		return observed && num(status, "updatedReplicas") == replicas && num(status, "availableReplicas") >= replicas &&
			num(status, "replicas") == replicas, ""
	case "StatefulSet.apps":
		cur, _, _ := unstructured.NestedString(status, "currentRevision")
		upd, _, _ := unstructured.NestedString(status, "updateRevision")
		return observed && num(status, "updatedReplicas") == replicas && num(status, "readyReplicas") >= replicas && cur == upd, ""
	case "DaemonSet.apps":
		desired := num(status, "desiredNumberScheduled")
		return observed && num(status, "updatedNumberScheduled") == desired && num(status, "numberAvailable") >= desired, ""
	}
	return true, ""
}

// rollBack gives subject name back what it had before generation key of
// the Binding changed it (its RollbackAnnotation), and holds it there
// (HeldAnnotation). A subject without a rollback for key is left as it is.
func (r *BaseReconciler) rollBack(ctx context.Context, s *subject, name, key string) error {
	client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	saved, ok := strings.CutPrefix(u.GetAnnotations()[RollbackAnnotation], key+" ")
	if !ok {
		return fmt.Errorf("no rollback recorded for %s", key)
	}
	var reverse []map[string]any
	if err := json.Unmarshal([]byte(saved), &reverse); err != nil {
		return fmt.Errorf("annotation %s: %w", RollbackAnnotation, err)
	}
	// Held first, so that admission leaves the subject as it is rolled
	// back to, whoever updates it next.
	held, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{HeldAnnotation: key}}})
	if err != nil {
		return err
	}
	if u, err = client.Patch(ctx, name, types.MergePatchType, held, metav1.PatchOptions{FieldManager: r.fieldManager(ctx)}); err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	// No guard on the resourceVersion: the workload's controller writes
	// the object too (its revision annotation), never its template, which
	// is all the reverse patch touches.
	ops := []map[string]any{
		{"op": "remove", "path": "/metadata/annotations/" + escapePointer(RollbackAnnotation)},
		{"op": "remove", "path": "/metadata/annotations/" + escapePointer(HeldAnnotation)},
	}
	ops = append(ops, reverse...)
	// The hold again, whatever the reverse did to the annotations.
	if !removesAnnotations(reverse) {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + escapePointer(HeldAnnotation), "value": key})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{HeldAnnotation: key}})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: r.fieldManager(ctx)})
	return err
}

// removesAnnotations reports whether ops remove the annotations map whole.
func removesAnnotations(ops []map[string]any) bool {
	return slices.ContainsFunc(ops, func(op map[string]any) bool {
		return op["op"] == "remove" && op["path"] == "/metadata/annotations"
	})
}

// escapePointer escapes a JSON pointer token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// markChange prepares after, a subject's pod template changed by w under
// a rollout policy: a hold is over, and with a rollback key the patch back
// to before is kept (RollbackAnnotation). A change that leaves the pod
// template as it was (the bound record only) keeps no rollback.
func markChange(shape duck.Shape, w work, before, after *duck.WithPod) (*duck.WithPod, error) {
	if !w.paced {
		return after, nil
	}
	if _, held := after.Annotations[HeldAnnotation]; held {
		// Reached by a rollout again: whatever held it is over.
		after = after.DeepCopy()
		delete(after.Annotations, HeldAnnotation)
	}
	if w.rollbackKey == "" || equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template) {
		return after, nil
	}
	reverse, err := shape.CreatePatch(after, before)
	if err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	js, err := json.Marshal(reverse)
	if err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	marked := after.DeepCopy()
	if marked.Annotations == nil {
		marked.Annotations = map[string]string{}
	}
	marked.Annotations[RollbackAnnotation] = w.rollbackKey + " " + string(js)
	return marked, nil
}

// RolloutObserver is an Observer that is also told of rollouts, for
// metrics (package metrics implements it). Its methods are called from the
// reconciler's workers; they must be quick.
type RolloutObserver interface {
	// RolloutWave: a wave of subjects was started.
	RolloutWave(binding schema.GroupResource)
	// RolloutHalted: a rollout halted.
	RolloutHalted(binding schema.GroupResource)
	// RolloutRolledBack: n subjects of a halted wave were rolled back.
	RolloutRolledBack(binding schema.GroupResource, n int)
}

// rolloutObserverOf is o when it observes rollouts, else one that does
// nothing.
func rolloutObserverOf(o Observer) RolloutObserver {
	if ro, ok := o.(RolloutObserver); ok {
		return ro
	}
	return nopObserver{}
}

func (nopObserver) RolloutWave(schema.GroupResource)            {}
func (nopObserver) RolloutHalted(schema.GroupResource)          {}
func (nopObserver) RolloutRolledBack(schema.GroupResource, int) {}
