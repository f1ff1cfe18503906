package configbinding

import (
	"context"

	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/wiring"
)

// Names the controller and webhook run under; config/ declares the same.
const (
	// ControllerName names the reconciler's work queue, logs and events.
	ControllerName = "configbindings"
	// WebhookConfigurationName is the MutatingWebhookConfiguration (and the
	// webhook in it) that a deployment installs, as config/ does for
	// GithubBinding, and the webhook's admission controller programs.
	WebhookConfigurationName = "configbindings.webhook.bindkit.dev"
	// WebhookPath is where the webhook server routes ConfigBinding
	// admission requests.
	WebhookPath = "/configbindings"
)

// New wires ConfigBindings with one call: its Controller binds existing
// subjects of every ConfigBinding and keeps its ConfigMap
// (ConfigMapReconciler), and unbinds them and deletes the ConfigMap when the
// Binding is deleted; its Webhook binds subjects as they are created or
// updated. Do and Undo run with WithContext on both paths.
func New() (*wiring.Kind, error) {
	return wiring.New[v1alpha1.ConfigBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		ControllerName:           ControllerName,
		WebhookConfigurationName: WebhookConfigurationName,
		WebhookPath:              WebhookPath,
		WithContext:              WithContext,
		SubResources:             subResources,
	})
}

// subResources builds the ConfigMapReconciler from the controller's
// context and has a ConfigMap edited or deleted behind the controller's
// back put right by a reconcile of the Binding that controls it.
func subResources(ctx context.Context, impl *controller.Impl) psbinding.SubResourcesReconcilerInterface {
	configMaps := injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps()
	configMaps.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: controller.FilterControllerGK(v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind).GroupKind()),
		Handler:    controller.HandleAll(impl.EnqueueControllerOf),
	})
	return &ConfigMapReconciler{Kube: injection.KubeClient(ctx), Lister: configMaps.Lister()}
}
