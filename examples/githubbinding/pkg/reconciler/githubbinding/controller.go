package githubbinding

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/psbinding"
)

// Names the controller and webhook run under; config/ declares the same.
const (
	// ControllerName names the reconciler's work queue, logs and events.
	ControllerName = "githubbindings"
	// WebhookConfigurationName is the MutatingWebhookConfiguration (and the
	// webhook in it) that config/500-webhook-configuration.yaml installs
	// and NewWebhook's controller programs.
	WebhookConfigurationName = "githubbindings.webhook.bindkit.dev"
	// WebhookPath is where the webhook server routes GithubBinding
	// admission requests.
	WebhookPath = "/githubbindings"
)

// NewController returns the Impl whose Reconciler, a
// *psbinding.BaseReconciler, binds existing subjects of every
// GithubBinding, and unbinds them when it is deleted. It reads the
// dynamic and kube clients, the RESTMapper and the informer factories from
// ctx and starts nothing; a GithubBinding change enqueues it, and so does a
// change to any subject it tracks. The Impl writes only while promoted
// (leader election, or Impl.Promote for a single replica); promotion
// enqueues every GithubBinding.
func NewController(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	informer := injection.TypedInformerFor[v1alpha1.GithubBinding](ctx, v1alpha1.GroupVersionResource())
	lister := informer.Lister()

	r := &psbinding.BaseReconciler{
		GVR: v1alpha1.GroupVersionResource(),
		// Straight from the lister: the reconciler works on a copy.
		Get: func(namespace, name string) (psbinding.Bindable, error) {
			return lister.Get(namespace, name)
		},
		Recorder: controller.NewEventRecorder(ctx, injection.KubeClient(ctx), newScheme(), ControllerName),
	}
	return psbinding.NewReconcilerImpl(ctx, ControllerName, r, informer.Informer(), listAll(lister))
}

// NewWebhook returns the Impl of the admission controller: its Reconciler,
// a *psbinding.AdmissionController, answers admission requests on
// WebhookPath and keeps the MutatingWebhookConfiguration
// WebhookConfigurationName pointed at the subjects' kinds with the current
// CA bundle. It also reads the system namespace from ctx.
func NewWebhook(ctx context.Context, _ configmap.Watcher) *controller.Impl {
	return psbinding.NewAdmissionController(ctx, WebhookConfigurationName, WebhookPath, ListAll, nil)
}

// ListAll is NewWebhook's psbinding.GetListAll: it adds handler to the
// GithubBinding informer in ctx and lists every GithubBinding from its
// cache.
func ListAll(ctx context.Context, handler cache.ResourceEventHandler) psbinding.ListAll {
	informer := injection.TypedInformerFor[v1alpha1.GithubBinding](ctx, v1alpha1.GroupVersionResource())
	informer.Informer().AddEventHandler(handler)
	return listAll(informer.Lister())
}

func listAll(lister *injection.TypedLister[v1alpha1.GithubBinding]) psbinding.ListAll {
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

// newScheme knows the built-in kinds and GithubBinding, so events about a
// GithubBinding name its kind even when its TypeMeta is empty.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Neither can fail: both only register Go types.
	_ = kubescheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}
