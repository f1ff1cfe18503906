package psbinding

import (
	"context"

	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// Bindable is a Binding that knows how to change its subjects: Do applies
// the Binding to a subject's pod template, Undo takes it away again. Both
// must be idempotent (Do twice equals Do once; Undo after Do restores what
// Do changed), because the admission controller and the reconciler may both
// run them on the same subject.
type Bindable interface {
	duck.Bindable

	// Do binds the subject: it changes wp in place.
	Do(ctx context.Context, wp *duck.WithPod)
	// Undo unbinds the subject: it reverts in wp what Do changed.
	Undo(ctx context.Context, wp *duck.WithPod)
}

// Mutation is the signature of Do and Undo.
type Mutation func(context.Context, *duck.WithPod)

// ListAll lists every Binding of one kind, typically from an informer's
// lister.
type ListAll func() ([]Bindable, error)

// GetListAll builds a ListAll once the caller's informers exist. handler is
// to be added to the Bindings' informer, so that a change to any Binding
// makes the admission controller rebuild its index.
type GetListAll func(ctx context.Context, handler cache.ResourceEventHandler) ListAll

// BindableContext prepares the context Do and Undo run in for one Binding,
// e.g. by resolving a value the Binding refers to. An error denies the
// admission request with a message that names the Binding.
type BindableContext func(ctx context.Context, b Bindable) (context.Context, error)

// subjectOfBindable reads what the index needs from a Bindable. A subject
// without a namespace is in the Binding's own namespace.
func subjectOfBindable(b Bindable) (tracker.Reference, string, string) {
	ref := b.GetSubject()
	if ref.Namespace == "" {
		ref.Namespace = b.GetNamespace()
	}
	return ref, b.GetNamespace(), b.GetName()
}
