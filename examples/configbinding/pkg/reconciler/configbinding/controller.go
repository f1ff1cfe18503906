package configbinding

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/psbinding"
)

// Names the controller and webhook run under; config/ declares the same.
const (
	// ControllerName names the reconciler's work queue, logs and events.
	ControllerName = "configbindings"
	// WebhookConfigurationName is the MutatingWebhookConfiguration (and the
	// webhook in it) that a deployment installs, as config/ does for
	// GithubBinding, and NewWebhook's controller programs.
	WebhookConfigurationName = "configbindings.webhook.bindkit.dev"
	// WebhookPath is where the webhook server routes ConfigBinding
	// admission requests.
	WebhookPath = "/configbindings"
)

// NewController returns the Impl whose Reconciler, a
// *psbinding.BaseReconciler, binds existing subjects of every
// ConfigBinding and keeps its ConfigMap (ConfigMapReconciler), and unbinds
// them and deletes the ConfigMap when the Binding is deleted. It reads the
// dynamic and kube clients, the RESTMapper and the informer factories from
// ctx and starts nothing; a ConfigBinding change enqueues it, and so does a
// change to any subject it tracks. The Impl writes only while promoted
// (leader election, or Impl.Promote for a single replica); promotion
// enqueues every ConfigBinding.
func NewController(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	informer := injection.TypedInformerFor[v1alpha1.ConfigBinding](ctx, v1alpha1.GroupVersionResource())
	lister := informer.Lister()
	configMaps := injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps()

	r := &psbinding.BaseReconciler{
		GVR: v1alpha1.GroupVersionResource(),
		// Straight from the lister: the reconciler works on a copy.
		Get: func(namespace, name string) (psbinding.Bindable, error) {
			return lister.Get(namespace, name)
		},
		WithContext:            WithContext,
		SubResourcesReconciler: &ConfigMapReconciler{Kube: injection.KubeClient(ctx), Lister: configMaps.Lister()},
		Recorder:               controller.NewEventRecorder(ctx, injection.KubeClient(ctx), newScheme(), ControllerName),
	}
	impl := psbinding.NewReconcilerImpl(ctx, ControllerName, r, informer.Informer(), listAll(lister))
	// A ConfigMap edited or deleted behind the controller's back is put
	// right by a reconcile of the Binding that controls it.
	configMaps.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: controller.FilterControllerGK(v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind).GroupKind()),
		Handler:    controller.HandleAll(impl.EnqueueControllerOf),
	})
	return impl
}

// NewWebhook returns the Impl of the admission controller: its Reconciler,
// a *psbinding.AdmissionController, answers admission requests on
// WebhookPath and keeps the MutatingWebhookConfiguration
// WebhookConfigurationName pointed at the subjects' kinds with the current
// CA bundle. Do and Undo run with WithContext. It also reads the system
// namespace from ctx.
func NewWebhook(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return psbinding.NewAdmissionController(ctx, WebhookConfigurationName, WebhookPath, ListAll, WithContext)
}

// ListAll is NewWebhook's psbinding.GetListAll: it adds handler to the
// ConfigBinding informer in ctx and lists every ConfigBinding from its
// cache.
func ListAll(ctx context.Context, handler cache.ResourceEventHandler) psbinding.ListAll {
	informer := injection.TypedInformerFor[v1alpha1.ConfigBinding](ctx, v1alpha1.GroupVersionResource())
	informer.Informer().AddEventHandler(handler)
	return listAll(informer.Lister())
}

func listAll(lister *injection.TypedLister[v1alpha1.ConfigBinding]) psbinding.ListAll {
	return func() ([]psbinding.Bindable, error) {
		bindings, err := lister.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", v1alpha1.GroupVersionResource().GroupResource(), err)
		}
		out := make([]psbinding.Bindable, len(bindings))
		for i, b := range bindings {
			out[i] = b
		}
		return out, nil
	}
}

// newScheme knows the built-in kinds and ConfigBinding, so events about a
// ConfigBinding name its kind even when its TypeMeta is empty.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Neither can fail: both only register Go types.
	_ = kubescheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}
