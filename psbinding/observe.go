package psbinding

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/controller"
)

// Observer is told what a BaseReconciler does to subjects, for metrics
// (package metrics implements it for Prometheus). binding is the Bindings'
// resource (BaseReconciler.GVR), the only label it should be counted by:
// never a Binding's or a subject's name.
//
// Its methods are called from the reconciler's workers and patch
// goroutines, concurrently; they must be quick.
type Observer interface {
	// SubjectPatched: a subject was patched, bound (Do) when bind is true,
	// unbound (Undo) otherwise.
	SubjectPatched(binding schema.GroupResource, bind bool)
	// SubjectConflict: a subject's patch was refused because the subject
	// changed since it was read; it is read again and retried.
	SubjectConflict(binding schema.GroupResource)
	// SubjectsBound: after a reconcile of the Binding key, n subjects are
	// bound by it (selected, not opted out, and recorded at its generation
	// or patched now). A deleted Binding reports 0, once it is gone.
	// Followers, which do not reconcile, report nothing.
	SubjectsBound(binding schema.GroupResource, key types.NamespacedName, n int)
}

// observerIn returns r.Observer, else the controller.Observer of ctx (the
// Impl's, which injection/sharedmain sets) when it is also an Observer,
// else one that does nothing.
func (r *BaseReconciler) observerIn(ctx context.Context) Observer {
	if r.Observer != nil {
		return r.Observer
	}
	if o, ok := controller.ObserverFrom(ctx).(Observer); ok && o != nil {
		return o
	}
	return nopObserver{}
}

type nopObserver struct{}

func (nopObserver) SubjectPatched(schema.GroupResource, bool)                     {}
func (nopObserver) SubjectConflict(schema.GroupResource)                          {}
func (nopObserver) SubjectsBound(schema.GroupResource, types.NamespacedName, int) {}

// AdmissionObserver is told how an AdmissionReconciler scoped its webhook,
// for metrics (package metrics implements it for Prometheus). It is called
// by the leader each time it programs the configuration, from one
// goroutine at a time per controller; it must be quick.
type AdmissionObserver interface {
	// WebhookScoped: the configuration's namespaceSelector names the
	// namespaces namespaces holding a Binding of the kind, or, when
	// allNamespaces, there were more than MaxSelectorNamespaces of them
	// and it covers every namespace but the protected ones.
	WebhookScoped(configuration string, namespaces int, allNamespaces bool)
}

// admissionObserverIn returns cfg.Observer, else the controller.Observer
// of ctx when it is also an AdmissionObserver, else one that does nothing.
func (ac *AdmissionReconciler) admissionObserverIn(ctx context.Context) AdmissionObserver {
	if ac.cfg.Observer != nil {
		return ac.cfg.Observer
	}
	if o, ok := controller.ObserverFrom(ctx).(AdmissionObserver); ok && o != nil {
		return o
	}
	return nopObserver{}
}

func (nopObserver) WebhookScoped(string, int, bool) {}
