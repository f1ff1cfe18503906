package psbinding

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// Bindable is a Binding that knows how to change its subjects: Do applies
// the Binding to a subject's pod template, Undo takes it away again. Both
// must be idempotent (Do twice equals Do once; Undo after Do restores what
// Do changed), because the admission controller and the reconciler may both
// run them on the same subject.
//
// What Do and Undo may rely on: each call gets a Binding of its own, a
// deep copy (DeepCopyObject) that no other reader sees, on every path
// (admission, the reconciler, companions, uninstall), so a change a call
// makes to its Binding is lost with the copy. What they must not do:
// change their Binding to remember something (an index, a flag), since the
// next call, in another copy, another reconcile or another process, does
// not see it; or depend on anything but the Binding, the subject and the
// context WithContext prepared (no clock, no random number, no state kept
// between calls): the webhook runs Do at every admitted update of a
// subject, so a Do whose result changes with time changes the pod template
// at every update, which rolls the workload's pods. bindingtest's
// CheckContract checks both.
type Bindable interface {
	duck.Bindable

	// Do binds the subject: it changes wp in place.
	Do(ctx context.Context, wp *duck.WithPod)
	// Undo unbinds the subject: it reverts in wp what Do changed.
	Undo(ctx context.Context, wp *duck.WithPod)
}

// StatusPublisher is a Bindable that publishes in its status something it
// computes from its spec, for others to read: a declarative Binding
// publishes its declarative.Spec there, which the kube-apiserver's
// MutatingAdmissionPolicy applies (package policy).
//
// The reconciler calls PublishStatus on its copy of the Binding once per
// reconcile, before it reconciles the subjects, and writes the status
// afterwards with the rest of it (only when it changed, so a publication
// that gives the same value costs no write). It is not called for a
// Binding being deleted. A panic in it is contained like one in Do.
type StatusPublisher interface {
	PublishStatus()
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

// subjectOfBindable is b's subject reference. A subject without a
// namespace is in the Binding's own namespace.
func subjectOfBindable(b Bindable) tracker.Reference {
	ref := b.GetSubject()
	if ref.Namespace == "" {
		ref.Namespace = b.GetNamespace()
	}
	return ref
}

// indexingBindable is what the admission index reads of a Bindable.
var indexingBindable = indexing[Bindable]{
	identity: func(b Bindable) (string, string, string) {
		return b.GetNamespace(), b.GetName(), b.GetResourceVersion()
	},
	subject: subjectOfBindable,
}

// NamespaceError reports a subject reference that leaves its Binding's
// namespace. A namespaced Binding acts only in its own namespace, on both
// paths: the reconciler marks it not Ready with ReasonSubjectOutsideNamespace
// and never patches the subject; admission never applies it; the webhook
// configuration ignores it. The framework enforces this whatever the
// Binding's CRD says.
type NamespaceError struct {
	// Binding is the Binding, as namespace/name.
	Binding string
	// BindingNamespace is the Binding's namespace, empty for a Binding kind
	// that is cluster-scoped.
	BindingNamespace string
	// SubjectNamespace is the namespace the subject reference names.
	SubjectNamespace string
}

func (e *NamespaceError) Error() string {
	if e.BindingNamespace == "" {
		return fmt.Sprintf("binding %s is cluster-scoped: bindkit binds subjects of namespaced Bindings only, each in its own namespace (the subject names namespace %q)", e.Binding, e.SubjectNamespace)
	}
	return fmt.Sprintf("subject namespace %q is not the binding's namespace %q: binding %s may only bind subjects in namespace %q", e.SubjectNamespace, e.BindingNamespace, e.Binding, e.BindingNamespace)
}

// checkSubjectNamespace returns a *NamespaceError when ref, with its
// namespace already defaulted to the Binding's, leaves the Binding's
// namespace.
func checkSubjectNamespace(bindingNamespace, bindingName string, ref tracker.Reference) error {
	if bindingNamespace != "" && ref.Namespace == bindingNamespace {
		return nil
	}
	return &NamespaceError{Binding: bindingNamespace + "/" + bindingName, BindingNamespace: bindingNamespace, SubjectNamespace: ref.Namespace}
}
