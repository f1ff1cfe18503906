package psbinding

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/bindkit/bindkit/duck"
)

// ReasonBindingPanicked is the Ready reason of a Binding whose own code (Do,
// Undo, WithContext, its SubResourcesReconciler) panicked: the message
// names the subject, when there is one, and the panic's value. The
// reconciler contains the panic, binds the Binding's other subjects, and
// retries with the work queue's capped backoff.
const ReasonBindingPanicked = "BindingPanicked"

// PanicError is a panic of code a Binding author wrote, contained by the
// framework so that it ends neither the process nor the work on other
// Bindings, kinds and subjects. The reconciler reports it in the Binding's
// Ready condition (ReasonBindingPanicked); admission refuses the request
// with its message.
type PanicError struct {
	// Binding names the Binding: "binding namespace/name".
	Binding string
	// Call is what panicked: "Do", "Undo", "WithContext",
	// "SubResourcesReconciler.Reconcile", ...
	Call string
	// Subject names the subject Do or Undo ran on, "" for calls that are
	// not about one subject.
	Subject string
	// Value is what the code panicked with.
	Value any
	// Stack is the goroutine's stack where the panic was recovered; it goes
	// to the log, never into a condition.
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("%s: %s panicked: %v", e.Binding, e.Call, e.Value)
	}
	return fmt.Sprintf("%s: %s panicked on subject %s: %v", e.Binding, e.Call, e.Subject, e.Value)
}

// contain runs f, author code, and turns a panic into a *PanicError. A
// panic with http.ErrAbortHandler is not special here: Do and Undo have no
// business aborting an HTTP handler.
func contain(b Bindable, call, subject string, f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Binding: describe(b), Call: call, Subject: subject, Value: v, Stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// containErr is contain for author code that returns an error.
func containErr(b Bindable, call, subject string, f func() error) (err error) {
	if perr := contain(b, call, subject, func() { err = f() }); perr != nil {
		return perr
	}
	return err
}

// callWithContext runs a BindableContext with its panic contained.
func callWithContext(ctx context.Context, withContext BindableContext, b Bindable) (mctx context.Context, err error) {
	err = containErr(b, "WithContext", "", func() error {
		var err error
		mctx, err = withContext(ctx, b)
		return err
	})
	return mctx, err
}

// application is one Binding applied (or taken away) by the binding step.
type application struct {
	// b is the Binding as its caller holds it, which may be shared: an
	// informer's object (admission's index, Companions), or the
	// reconcile's copy that its subjects' patches read at once. Do and
	// Undo run on a private copy of it (privateCopy), unless private says
	// b is one already.
	b Bindable
	// private says that b is a copy made for this application alone (so
	// that WithContext and Do see the same one), which no one else reads:
	// the step hands it to Do or Undo as it is. It is used by one binding
	// step.
	private bool
	// ctx is the context Do or Undo runs in (WithContext's).
	ctx context.Context
	// bind runs Do, else Undo.
	bind bool
	// by is how b records itself in the subject's duck.BoundAnnotation,
	// when record is set (admission before the Bindings' resource is
	// known records nothing).
	by     duck.BoundBy
	record bool
}

// bindingStep is the one binding step of both paths, admission and
// reconciler: on a copy of before, each application's Do (or Undo) in
// order, each on a private copy of its Binding (application.private) and
// followed by its record in the bound annotation, then the JSON
// patch from before to the copy, computed with shape. A panic of Do or Undo
// is returned as a *PanicError whose Subject the caller fills in (naming
// the subject costs allocations only a panic should pay), and no patch:
// the subject is left as it is.
func bindingStep(shape duck.Shape, before *duck.WithPod, apps ...application) (*duck.WithPod, []jsonpatch.JsonPatchOperation, error) {
	after := before.DeepCopy()
	for i := range apps {
		if err := apply(&apps[i], after); err != nil {
			return nil, nil, err
		}
	}
	ops, err := shape.CreatePatch(before, after)
	if err != nil {
		return nil, nil, fmt.Errorf("create patch: %w", err)
	}
	return after, ops, nil
}

// privateCopy is a deep copy of b for the author's code (Do, Undo,
// WithContext) to have to itself: a Do that changes its Binding (trims a
// URL, appends to a list of its spec) then changes nothing another reader
// sees, neither an informer's cache, from which every later request and
// reconcile would read the change, nor another subject's Do. A
// DeepCopyObject that panics or gives something else than a Bindable is
// an error naming the Binding.
func privateCopy(b Bindable) (Bindable, error) {
	var obj any
	if err := contain(b, "DeepCopyObject", "", func() { obj = b.DeepCopyObject() }); err != nil {
		return nil, err
	}
	cp, ok := obj.(Bindable)
	if !ok || cp == nil {
		return nil, fmt.Errorf("%s: DeepCopyObject gives %T, not a Bindable", describe(b), obj)
	}
	return cp, nil
}

// apply runs one application on wp in place, on a private copy of its
// Binding.
func apply(a *application, wp *duck.WithPod) error {
	b := a.b
	if !a.private {
		var err error
		if b, err = privateCopy(a.b); err != nil {
			return err
		}
	}
	if a.bind {
		if err := contain(b, "Do", "", func() { b.Do(a.ctx, wp) }); err != nil {
			return err
		}
		if a.record {
			duck.MarkBound(wp, a.by, a.b.GetGeneration())
		}
		return nil
	}
	var template *corev1.PodTemplateSpec
	if a.record && len(duck.BoundOf(wp.Annotations)) > 1 {
		template = wp.Spec.Template.DeepCopy()
	}
	if err := contain(b, "Undo", "", func() { b.Undo(a.ctx, wp) }); err != nil {
		return err
	}
	if a.record {
		duck.MarkUnbound(wp, a.by)
		if template != nil && !equality.Semantic.DeepEqual(template, &wp.Spec.Template) {
			// Undo took back what another Binding may have set too (the
			// same variable, a shared volume): the others' records no
			// longer promise what the subject carries. Each stays (its
			// Undo must still run at its deletion or an uninstall) at
			// generation 0, which no Binding is at: each binds the
			// subject again, and where its change is still there, that
			// writes its record and nothing else.
			others := duck.BoundOf(wp.Annotations)
			for e := range others {
				others[e] = 0
			}
			wp.Annotations = duck.SetBound(wp.Annotations, others)
		}
	}
	return nil
}

// nameSubject sets the Subject of a *PanicError err holds to subject, and
// returns err.
func nameSubject(err error, subject string) error {
	if p, ok := errors.AsType[*PanicError](err); ok {
		p.Subject = subject
	}
	return err
}
