package wiring

import (
	"context"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"

	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
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
		g := namespaceGuard(ctx, gvr, "", fieldManager)
		r, err := policy.NewReconciler(policy.Options{Objects: g.objects, Logger: logging.FromContext(ctx)})
		if err != nil {
			panic(err)
		}
		impl := controller.NewImpl(r, logging.FromContext(ctx), g.name)
		g.watch(impl.EnqueueKey)
		return impl
	}
}

// AuthorityFor is the constructor of a leader-only controller that
// programs, for a kind wired field by field (knative's way) rather than by
// New, what New's Webhook programs for every kind: the authority policy
// of opts (policy.Authority: a Binding is refused unless its author may
// patch what it reaches) and, where the kube-apiserver serves
// MutatingAdmissionPolicy, the requested-by record (policy.RequestedBy);
// it heals both when edited or deleted. fieldManager names its writes.
// The process needs get, list, watch, create and update on the four
// objects, limited by resourceNames to policy.AuthorityName and
// policy.RequestedByName of the kind.
func AuthorityFor(opts policy.AuthorityOptions, fieldManager string) func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		g := authority(ctx, opts, fieldManager)
		if recordsRequester(ctx, opts.Resource.GroupResource().String()) {
			g.add(requestedBy(ctx, opts.Resource, fieldManager))
		}
		r, err := policy.NewReconciler(policy.Options{Objects: g.objects, Logger: logging.FromContext(ctx)})
		if err != nil {
			panic(err)
		}
		impl := controller.NewImpl(r, logging.FromContext(ctx), g.name)
		g.watch(impl.EnqueueKey)
		return impl
	}
}

// guardObjects are the policies a kind's admission controller keeps
// programmed on the kind's own Bindings (the namespace guard, the
// authority policy, the requested-by record), and how to watch them.
type guardObjects struct {
	name    string
	objects []policy.Object
	// watch adds to the guards' informers a handler that enqueues the
	// object's key.
	watch func(enqueue func(key string))
}

// add appends o's objects and watches to g's.
func (g *guardObjects) add(o *guardObjects) {
	g.objects = append(g.objects, o.objects...)
	prev := g.watch
	g.watch = func(enqueue func(string)) {
		if prev != nil {
			prev(enqueue)
		}
		o.watch(enqueue)
	}
}

// namespaceGuard builds the namespace guard of gvr's Bindings from ctx.
func namespaceGuard(ctx context.Context, gvr schema.GroupVersionResource, subjectPath, fieldManager string) *guardObjects {
	opts := policy.NamespaceGuardOptions{Resource: gvr, SubjectPath: subjectPath}
	name := policy.NamespaceGuardName(gvr.GroupResource())
	return validatingGuard(ctx, name, func(policies admissionlisters.ValidatingAdmissionPolicyLister, bindings admissionlisters.ValidatingAdmissionPolicyBindingLister) ([]policy.Object, error) {
		return policy.NamespaceGuardObjects(opts, injection.KubeClient(ctx), policies, bindings, fieldManager)
	})
}

// authority builds the authority policy of opts' Bindings from ctx.
func authority(ctx context.Context, opts policy.AuthorityOptions, fieldManager string) *guardObjects {
	name := policy.AuthorityName(opts.Resource.GroupResource())
	return validatingGuard(ctx, name, func(policies admissionlisters.ValidatingAdmissionPolicyLister, bindings admissionlisters.ValidatingAdmissionPolicyBindingLister) ([]policy.Object, error) {
		return policy.AuthorityObjects(opts, injection.KubeClient(ctx), policies, bindings, fieldManager)
	})
}

// validatingGuard is a ValidatingAdmissionPolicy named name and its
// binding, read through informers limited to that name.
func validatingGuard(ctx context.Context, name string, objects func(admissionlisters.ValidatingAdmissionPolicyLister, admissionlisters.ValidatingAdmissionPolicyBindingLister) ([]policy.Object, error)) *guardObjects {
	factory := injection.NamedKubeInformerFactory(ctx, name).Admissionregistration().V1()
	policies := factory.ValidatingAdmissionPolicies()
	bindings := factory.ValidatingAdmissionPolicyBindings()
	objs, err := objects(policies.Lister(), bindings.Lister())
	if err != nil {
		panic(err)
	}
	return &guardObjects{name: name, objects: objs, watch: func(enqueue func(string)) {
		policies.Informer().AddEventHandler(controller.HandleAll(func(any) { enqueue(name) }))
		bindings.Informer().AddEventHandler(controller.HandleAll(func(any) { enqueue(policy.BindingKeyPrefix + name) }))
	}}
}

// requestedBy builds the requested-by policy of gvr's Bindings from ctx.
func requestedBy(ctx context.Context, gvr schema.GroupVersionResource, fieldManager string) *guardObjects {
	name := policy.RequestedByName(gvr.GroupResource())
	factory := injection.NamedKubeInformerFactory(ctx, name).Admissionregistration().V1()
	policies := factory.MutatingAdmissionPolicies()
	bindings := factory.MutatingAdmissionPolicyBindings()
	objs, err := policy.RequestedByObjects(gvr, injection.KubeClient(ctx), policies.Lister(), bindings.Lister(), fieldManager)
	if err != nil {
		panic(err)
	}
	return &guardObjects{name: name, objects: objs, watch: func(enqueue func(string)) {
		policies.Informer().AddEventHandler(controller.HandleAll(func(any) { enqueue(name) }))
		bindings.Informer().AddEventHandler(controller.HandleAll(func(any) { enqueue(policy.BindingKeyPrefix + name) }))
	}}
}

// guards builds the policies b's Webhook keeps programmed on b's
// Bindings: the authority policy, the namespace guard unless opted out,
// and the requested-by record where the kube-apiserver serves
// MutatingAdmissionPolicy.
func (b *Kind) guards(ctx context.Context) *guardObjects {
	g := authority(ctx, b.authority, b.ControllerName)
	if b.namespaceGuard {
		g.add(namespaceGuard(ctx, b.GVR, b.authority.SubjectPath, b.ControllerName))
	}
	if recordsRequester(ctx, b.GVK.Kind) {
		g.add(requestedBy(ctx, b.GVR, b.ControllerName))
	}
	return g
}

// recordsRequester reports whether the kube-apiserver serves
// MutatingAdmissionPolicy, which records who asked for a Binding of kind.
// Discovery that fails (an API server not reachable yet as the process
// starts) counts as served, as every supported minor serves it: the
// policy's informers then wait, logging, for the API server, where
// refusing to start would end the process for a passing fault.
func recordsRequester(ctx context.Context, kind string) bool {
	logger := logging.FromContext(ctx).With(zap.String("kind", kind), zap.String("annotation", policy.RequestedByAnnotation))
	served, err := policy.MutatingPoliciesServed(injection.KubeClient(ctx).Discovery())
	switch {
	case err != nil:
		logger.Warn("Bindings record who asked for them once the kube-apiserver answers: discovery failed", zap.Error(err))
		return true
	case !served:
		logger.Warn("Bindings do not record who asked for them: the kube-apiserver does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy")
	}
	return served
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

// LeavePath implements webhook.PathLeaver: the inner reconciler's, when
// it can leave the kube-apiserver's path (a declarative kind's); a kind
// whose webhook is its only path cannot.
func (w *withGuard) LeavePath(ctx context.Context) bool {
	if l, ok := w.inner.(webhook.PathLeaver); ok {
		return l.LeavePath(ctx)
	}
	return false
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
