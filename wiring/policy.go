package wiring

import (
	"context"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/policy"
)

// NamespaceGuard returns the constructor of the leader-only controller that
// programs b's namespace guard (policy.NamespaceGuard: a
// ValidatingAdmissionPolicy and its binding refusing a Binding whose
// subject names another namespace) and heals it when it is edited or
// deleted. Pass it to sharedmain beside b.Controller and b.Webhook. The
// process needs get, list, watch, create and update on both objects, limited
// by resourceNames to policy.NamespaceGuardName(b.GVR.GroupResource()).
//
// It reads the kube client and the informers from ctx; a context without
// them is a wiring mistake and panics, naming what is missing.
func NamespaceGuard(b *Kind) func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		logger := logging.FromContext(ctx)
		opts := policy.NamespaceGuardOptions{Resource: b.GVR}
		name := policy.NamespaceGuardName(b.GVR.GroupResource())
		factory := injection.NamedKubeInformerFactory(ctx, name).Admissionregistration().V1()
		policies := factory.ValidatingAdmissionPolicies()
		bindings := factory.ValidatingAdmissionPolicyBindings()
		objects, err := policy.NamespaceGuardObjects(opts, injection.KubeClient(ctx), policies.Lister(), bindings.Lister(), b.ControllerName)
		if err != nil {
			panic(err)
		}
		r, err := policy.NewReconciler(policy.Options{Objects: objects, Logger: logger})
		if err != nil {
			panic(err)
		}
		impl := controller.NewImpl(r, logger, name)
		policies.Informer().AddEventHandler(controller.HandleAll(func(any) { impl.EnqueueKey(name) }))
		bindings.Informer().AddEventHandler(controller.HandleAll(func(any) { impl.EnqueueKey(policy.BindingKeyPrefix + name) }))
		return impl
	}
}
