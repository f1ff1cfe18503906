package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

func rolloutCommand() command {
	return command{
		name:    "rollout",
		summary: "show, pause, resume or undo a Binding's rollout, as kubectl rollout does a Deployment's",
		usage: `kubectl bindkit rollout status|pause|resume|undo TYPE/NAME [flags]

  status  wait until the rollout is complete, paused or halted (--watch=false:
          say where it stands now) and say so; the exit status tells which
  pause   stop the rollout after the wave in flight; a Binding paused before
          it is created or edited changes no subject, and publishes its plan
          (kubectl bindkit plan)
  resume  let a paused rollout go on (an undo in force is taken back too:
          the Binding's generation rolls out again)
  undo    undo the Binding's current generation: every subject goes back,
          wave by wave, to the generation before it that last rolled out
          to every subject (from the Binding's rollout history): the
          current generation's Undo, then that earlier one's Do; it holds
          until the Binding is edited or resumed

Examples:
  # Hold a Binding, edit it, look at the plan, then let it roll out
  kubectl bindkit rollout pause sinkbinding/sink -n shop
  kubectl -n shop patch sinkbinding sink --type=merge -p '{"spec":{"sink":"https://new"}}'
  kubectl bindkit plan sinkbinding/sink -n shop
  kubectl bindkit rollout resume sinkbinding/sink -n shop
  kubectl bindkit rollout status sinkbinding/sink -n shop --timeout=10m

  # Take a change back
  kubectl bindkit rollout undo sinkbinding/sink -n shop`,
		flags: func(fs *pflag.FlagSet, o *options) {
			fs.BoolVarP(&o.watch, "watch", "w", true, "status: wait for the rollout to end (false: say where it stands now)")
			fs.DurationVar(&o.timeout, "timeout", 0, "status: how long to wait, 0 for ever")
		},
		run: runRollout,
	}
}

func runRollout(ctx context.Context, o *options, args []string) error {
	if len(args) == 0 {
		return usageError(o, "rollout: want status, pause, resume or undo")
	}
	verb := args[0]
	typ, name, err := oneObject(o, "Binding", args[1:])
	if err != nil {
		return err
	}
	if !slices.Contains([]string{"status", "pause", "resume", "undo"}, verb) {
		return usageError(o, "rollout: unknown verb %q: want status, pause, resume or undo", verb)
	}
	if err := o.connect(); err != nil {
		return err
	}
	b, err := o.cluster.get(ctx, typ, name)
	if err != nil {
		return err
	}
	switch verb {
	case "status":
		return rolloutStatus(ctx, o, b)
	case "pause":
		return rolloutPause(ctx, o, b)
	case "resume":
		return rolloutResume(ctx, o, b)
	case "undo":
		return rolloutUndo(ctx, o, b)
	}
	return usageError(o, "rollout: unknown verb %q: want status, pause, resume or undo", verb)
}

func rolloutPause(ctx context.Context, o *options, b *object) error {
	if strings.TrimSpace(b.u.GetAnnotations()[psbinding.RolloutPausedAnnotation]) == "true" {
		fmt.Fprintf(o.stdout, "%s already paused\n", b)
		return nil
	}
	if err := o.cluster.annotate(ctx, b, map[string]any{psbinding.RolloutPausedAnnotation: "true"}); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%s paused\n", b)
	return nil
}

func rolloutResume(ctx context.Context, o *options, b *object) error {
	ann := b.u.GetAnnotations()
	_, paused := ann[psbinding.RolloutPausedAnnotation]
	_, undo := ann[psbinding.RolloutUndoAnnotation]
	if !paused && !undo {
		fmt.Fprintf(o.stdout, "%s is not paused\n", b)
		return nil
	}
	if err := o.cluster.annotate(ctx, b, map[string]any{psbinding.RolloutPausedAnnotation: nil, psbinding.RolloutUndoAnnotation: nil}); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s resumed", b)
	if undo && strings.TrimSpace(ann[psbinding.RolloutUndoAnnotation]) == strconv.FormatInt(b.u.GetGeneration(), 10) {
		msg += fmt.Sprintf(" (its undo taken back: generation %d rolls out again)", b.u.GetGeneration())
	}
	fmt.Fprintln(o.stdout, msg)
	return nil
}

func rolloutUndo(ctx context.Context, o *options, b *object) error {
	gen := b.u.GetGeneration()
	history, err := psbinding.HistoryOf(b.u.GetAnnotations())
	if err != nil {
		return fmt.Errorf("%s: %w", b, err)
	}
	to, ok := psbinding.Restorable(history, gen)
	if !ok {
		return fmt.Errorf("%s: no rollout completed before generation %d is recorded (%s), nothing to undo to", b, gen, psbinding.RolloutHistoryAnnotation)
	}
	if err := o.cluster.annotate(ctx, b, map[string]any{psbinding.RolloutUndoAnnotation: strconv.FormatInt(gen, 10), psbinding.RolloutPausedAnnotation: nil}); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%s rolling back: generation %d undone, its subjects brought back to generation %d\n", b, gen, to.Generation)
	return nil
}

// Rollout states, as rollout status names them.
const (
	stateComplete   = "complete"
	stateRollingOut = "rolling-out"
	statePaused     = "paused"
	stateHalted     = "halted"
	stateUndoing    = "undoing"
	stateUndone     = "undone"
	statePending    = "pending"
	stateFailed     = "failed"
	stateNotReady   = "not-ready"
)

// rolloutView is where a Binding's rollout stands, as rollout status
// prints it.
type rolloutView struct {
	Binding            string              `json:"binding"`
	Namespace          string              `json:"namespace"`
	Generation         int64               `json:"generation"`
	ObservedGeneration int64               `json:"observedGeneration"`
	State              string              `json:"state"`
	Reason             string              `json:"reason,omitempty"`
	Message            string              `json:"message,omitempty"`
	Rollout            *duck.RolloutStatus `json:"rollout,omitempty"`
}

// failedReasons are Ready reasons no waiting mends: someone must act.
var failedReasons = []string{psbinding.ReasonUndoUnavailable, psbinding.ReasonRolloutPolicyInvalid, psbinding.ReasonBindingInvalid,
	psbinding.ReasonSubjectInvalid, psbinding.ReasonSubjectOutsideNamespace, psbinding.ReasonBindingPanicked}

// viewOf reads where b's rollout stands from its status.
func viewOf(b *object) rolloutView {
	st := statusOf(b.u)
	v := rolloutView{Binding: b.String(), Namespace: b.u.GetNamespace(), Generation: b.u.GetGeneration(), ObservedGeneration: st.ObservedGeneration, Rollout: st.Rollout}
	ready := st.GetCondition(duck.ConditionReady)
	if ready == nil || st.ObservedGeneration != b.u.GetGeneration() || ready.ObservedGeneration != b.u.GetGeneration() {
		v.State, v.Message = statePending, fmt.Sprintf("generation %d not yet observed by its controller", b.u.GetGeneration())
		return v
	}
	v.Reason, v.Message = ready.Reason, ready.Message
	_, undo := b.u.GetAnnotations()[psbinding.RolloutUndoAnnotation]
	switch {
	case (ready.Reason == psbinding.ReasonRolloutPaused && !pausedOf(b.u)) ||
		((ready.Reason == psbinding.ReasonRolloutUndone || ready.Reason == psbinding.ReasonUndoingRollout) && !undo):
		// A resume (or an undo taken back) changes annotations, not the
		// generation: the status speaks of before it until the
		// controller has reconciled.
		v.State, v.Message = statePending, "resumed; not yet observed by its controller"
	case undoRequested(b.u) && (st.Rollout == nil || st.Rollout.UndoneFrom != b.u.GetGeneration()) && !slices.Contains(failedReasons, ready.Reason):
		// An undo of this generation changes an annotation, not the
		// generation: until the controller has reconciled, the status
		// speaks of the rollout it undoes (halted, say).
		v.State, v.Message = statePending, fmt.Sprintf("undo of generation %d not yet observed by its controller", b.u.GetGeneration())
	case ready.Status == metav1.ConditionTrue:
		v.State = stateComplete
	case ready.Reason == psbinding.ReasonRolloutPaused:
		v.State = statePaused
	case ready.Reason == psbinding.ReasonRolloutHalted:
		v.State = stateHalted
	case ready.Reason == psbinding.ReasonRollingOut:
		v.State = stateRollingOut
	case ready.Reason == psbinding.ReasonUndoingRollout:
		v.State = stateUndoing
	case ready.Reason == psbinding.ReasonRolloutUndone:
		v.State = stateUndone
	case slices.Contains(failedReasons, ready.Reason):
		v.State = stateFailed
	default:
		v.State = stateNotReady
	}
	return v
}

// done reports whether v ends rollout status, and with which exit status.
func (v rolloutView) done() (bool, int) {
	switch v.State {
	case stateComplete, stateUndone:
		return true, ExitOK
	case statePaused:
		return true, ExitPaused
	case stateHalted:
		return true, ExitHalted
	case stateFailed:
		return true, ExitError
	}
	return false, ExitChanges
}

// line says where v stands, in one line.
func (v rolloutView) line() string {
	ro := v.Rollout
	switch v.State {
	case stateComplete:
		if ro != nil {
			return fmt.Sprintf("%s: generation %d rolled out: %d of %d subjects updated in %d waves", v.Binding, v.Generation, ro.Updated, ro.Total, ro.Wave)
		}
		return fmt.Sprintf("%s: generation %d rolled out", v.Binding, v.Generation)
	case stateRollingOut, stateUndoing, statePending, stateNotReady:
		return fmt.Sprintf("Waiting for %s rollout to finish: %s", v.Binding, v.Message)
	}
	return fmt.Sprintf("%s: rollout %s: %s", v.Binding, v.State, v.Message)
}

func rolloutStatus(ctx context.Context, o *options, b *object) error {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	last := ""
	for {
		v := viewOf(b)
		end, code := v.done()
		if o.output == "" || o.output == "table" {
			if line := v.line(); line != last {
				fmt.Fprintln(o.stdout, line)
				last = line
			}
		}
		if end || !o.watch || ctx.Err() != nil {
			if o.output == "json" || o.output == "yaml" {
				if err := printData(o.stdout, o.output, v); err != nil {
					return err
				}
			}
			if !end && o.watch {
				return exit(ExitChanges, fmt.Errorf("%s: timed out waiting for the rollout: %s", v.Binding, v.Message))
			}
			return quietExit(code)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			u, err := o.cluster.dynamic.Resource(b.gvr).Namespace(b.u.GetNamespace()).Get(ctx, b.u.GetName(), metav1.GetOptions{})
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: %w", b, err)
			}
			if err == nil {
				b = &object{gvr: b.gvr, kind: b.kind, u: u}
			}
		}
	}
}

// pausedOf reports whether u's rollout is paused.
// undoRequested reports whether u's RolloutUndoAnnotation undoes its
// current generation (as rollout undo writes it); one naming an earlier
// generation no longer applies.
func undoRequested(u *unstructured.Unstructured) bool {
	return strings.TrimSpace(u.GetAnnotations()[psbinding.RolloutUndoAnnotation]) == strconv.FormatInt(u.GetGeneration(), 10)
}

func pausedOf(u *unstructured.Unstructured) bool {
	return strings.TrimSpace(u.GetAnnotations()[psbinding.RolloutPausedAnnotation]) == "true"
}
