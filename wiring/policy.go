package wiring

import (
	"context"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
)

// NamespaceGuard returns the constructor of a leader-only controller that
// programs b's namespace guard (policy.NamespaceGuard: a
// ValidatingAdmissionPolicy and its binding refusing a Binding whose
// subject names another namespace) and heals it when it is edited or
// deleted. b.Webhook does the same unless b was wired with
// Options.WithoutNamespaceGuard, so it is needed only for such a kind that
// still wants the guard run apart; passed beside a b.Webhook that guards,
// both program the same objects, which costs nothing but a second watch.
// The process needs get, list, watch, create and update on both objects,
// limited by resourceNames to policy.NamespaceGuardName(b.GVR.GroupResource()).
//
// It reads the kube client and the informers from ctx; a context without
// them is a wiring mistake and panics, naming what is missing.
func NamespaceGuard(b *Kind) func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return NamespaceGuardFor(b.GVR, b.ControllerName)
}

// NamespaceGuardFor is NamespaceGuard for a kind wired field by field,
// knative's way, rather than by New: gvr is the Bindings' resource,
// fieldManager names the guard's writes.
func NamespaceGuardFor(gvr schema.GroupVersionResource, fieldManager string) func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		g := namespaceGuard(ctx, gvr, fieldManager)
		r, err := policy.NewReconciler(policy.Options{Objects: g.objects, Logger: logging.FromContext(ctx)})
		if err != nil {
			panic(err)
		}
		impl := controller.NewImpl(r, logging.FromContext(ctx), g.name)
		g.watch(impl.EnqueueKey)
		return impl
	}
}

// guardObjects are a kind's namespace guard: the policy objects, and how
// to watch them.
type guardObjects struct {
	name    string
	objects []policy.Object
	// watch adds to the guard's informers a handler that enqueues the
	// object's key.
	watch func(enqueue func(key string))
}

// namespaceGuard builds the namespace guard of gvr's Bindings from ctx.
func namespaceGuard(ctx context.Context, gvr schema.GroupVersionResource, fieldManager string) *guardObjects {
	opts := policy.NamespaceGuardOptions{Resource: gvr}
	name := policy.NamespaceGuardName(gvr.GroupResource())
	factory := injection.NamedKubeInformerFactory(ctx, name).Admissionregistration().V1()
	policies := factory.ValidatingAdmissionPolicies()
	bindings := factory.ValidatingAdmissionPolicyBindings()
	objects, err := policy.NamespaceGuardObjects(opts, injection.KubeClient(ctx), policies.Lister(), bindings.Lister(), fieldManager)
	if err != nil {
		panic(err)
	}
	return &guardObjects{name: name, objects: objects, watch: func(enqueue func(string)) {
		policies.Informer().AddEventHandler(controller.HandleAll(func(any) { enqueue(name) }))
		bindings.Informer().AddEventHandler(controller.HandleAll(func(any) { enqueue(policy.BindingKeyPrefix + name) }))
	}}
}

// withGuard is a kind's admission controller that also keeps its
// namespace guard programmed: the guard's keys go to the guard's
// reconciler, every other key to the admission controller's (inner).
type withGuard struct {
	*psbinding.AdmissionReconciler
	inner interface {
		controller.Reconciler
		controller.LeaderAware
	}
	guard *policy.Reconciler
	keys  map[string]bool
}

// guarded wraps inner, the Reconciler of ac's Impl, with g; a nil g leaves
// it as it is.
func guarded(ac *psbinding.AdmissionReconciler, inner interface {
	controller.Reconciler
	controller.LeaderAware
}, g *guardObjects, logger *zap.Logger) controller.Reconciler {
	if g == nil {
		return inner
	}
	r, err := policy.NewReconciler(policy.Options{Objects: g.objects, Logger: logger})
	if err != nil {
		panic(err)
	}
	keys := map[string]bool{}
	for _, n := range r.Names() {
		keys[n] = true
	}
	return &withGuard{AdmissionReconciler: ac, inner: inner, guard: r, keys: keys}
}

// Uninstall implements sharedmain.Uninstaller: the inner reconciler's
// (a declarative kind's removes its policy too), else the admission
// controller's.
func (w *withGuard) Uninstall(ctx context.Context) error {
	if u, ok := w.inner.(interface{ Uninstall(context.Context) error }); ok {
		return u.Uninstall(ctx)
	}
	return w.AdmissionReconciler.Uninstall(ctx)
}

// Reconcile implements controller.Reconciler.
func (w *withGuard) Reconcile(ctx context.Context, key string) error {
	if w.keys[key] {
		return w.guard.Reconcile(ctx, key)
	}
	return w.inner.Reconcile(ctx, key)
}

// Promote implements controller.LeaderAware.
func (w *withGuard) Promote(enqueue func(string)) {
	w.inner.Promote(enqueue)
	w.guard.Promote(enqueue)
}

// Demote implements controller.LeaderAware.
func (w *withGuard) Demote() {
	w.inner.Demote()
	w.guard.Demote()
}

// Admission returns the admission controller a kind's webhook Impl runs,
// whatever wraps it (the namespace guard, the handover to a policy), or
// false when impl runs none. Tests use it to admit through the same
// controller sharedmain serves.
func Admission(impl *controller.Impl) (*psbinding.AdmissionReconciler, bool) {
	switch r := impl.Reconciler().(type) {
	case *psbinding.AdmissionReconciler:
		return r, true
	case *withGuard:
		return r.AdmissionReconciler, true
	case *handover:
		return r.AdmissionReconciler, true
	}
	return nil, false
}
