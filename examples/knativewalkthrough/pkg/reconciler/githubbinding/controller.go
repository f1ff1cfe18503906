package githubbinding

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/knativewalkthrough/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"
)

const controllerAgentName = "githubbinding-controller"

// Names of the admission webhook, as config/webhook.yaml declares them.
const (
	// WebhookName names the MutatingWebhookConfiguration NewWebhook programs.
	WebhookName = "githubbindings.webhook.walkthrough.bindkit.dev"
	// WebhookPath is where the webhook server routes GithubBindings.
	WebhookPath = "/githubbindings"
)

// GVR is the GithubBindings' resource.
var GVR = v1alpha1.SchemeGroupVersion.WithResource("githubbindings")

// NewController builds the GithubBinding controller field by field, as the
// knative walkthrough does.
func NewController(
	ctx context.Context,
	cmw configmap.Watcher,
) *controller.Impl {
	logger := logging.FromContext(ctx)

	// knative: ghinformer.Get(ctx), dynamicclient.Get(ctx) and
	// podspecable.Get(ctx) from generated injection packages.
	ghInformer := informer(ctx)
	dc := injection.DynamicClient(ctx)
	psInformerFactory := injection.DuckInformerFactory(ctx)

	c := &psbinding.BaseReconciler{
		GVR: GVR,
		Get: func(namespace string, name string) (psbinding.Bindable, error) {
			// knative: Lister().GithubBindings(namespace).Get(name).
			return ghInformer.Lister().ByNamespace(namespace).Get(name)
		},
		DynamicClient: dc,
		// knative: no Mapper; bindkit asks discovery for subjects' resources.
		Mapper: injection.RESTMapper(ctx),
		Recorder: record.NewBroadcaster().NewRecorder(
			scheme.Scheme, corev1.EventSource{Component: controllerAgentName}),
	}
	// knative: no ExcludedNamespaces; bindkit's reconciler acts nowhere
	// its webhook is not called (the system and kube-* namespaces).
	c.ExcludedNamespaces = wiring.ExcludedNamespaces(ctx)
	logger = logger.Named("GithubBindings")
	impl := controller.NewContext(ctx, c, controller.ControllerOptions{WorkQueueName: "GithubBinding", Logger: logger})

	logger.Info("adding the event handlers")

	ghInformer.Informer().AddEventHandler(controller.HandleAll(impl.Enqueue))

	// knative: tracker.New(impl.EnqueueKey, controller.GetTrackerLease(ctx)).
	c.Tracker = tracker.New(func(o tracker.Observer) { impl.EnqueueNamespacedName(o.NamespacedName) }, psbinding.DefaultTrackerLease)
	// knative: a duck.CachedInformerFactory around this one. bindkit's
	// psInformerFactory is already the process's cache, shared by every
	// Binding kind; the handler goes straight on it.
	c.Factory = &duck.EnqueueInformerFactory{
		Delegate: psInformerFactory,
		// knative: controller.HandleAll(c.Tracker.OnChanged).
		EventHandler: psbinding.SubjectEventHandler(c.Tracker, nil),
	}

	// c.WithContext, if Do and Undo needed more than the Binding, would
	// prepare their context here.

	return impl
}

// NewWebhook returns the admission controller of GithubBindings.
func NewWebhook(ctx context.Context, cmw configmap.Watcher) *controller.Impl {
	// knative: psbinding.NewAdmissionController; bindkit keeps the
	// constructors that read the context in package wiring.
	return wiring.NewAdmissionController(ctx,
		WebhookName, // the MutatingWebhookConfiguration to program
		WebhookPath, // where the webhook server routes this kind
		ListAll,     // every GithubBinding, for the index and the rules
		// Do and Undo need nothing beyond the Binding.
		func(ctx context.Context, b psbinding.Bindable) (context.Context, error) {
			return ctx, nil
		},
	)
}

// ListAll is NewWebhook's psbinding.GetListAll: handler hears of every
// GithubBinding change, and the ListAll it returns lists them all.
func ListAll(ctx context.Context, handler cache.ResourceEventHandler) psbinding.ListAll {
	ghInformer := informer(ctx)
	ghInformer.Informer().AddEventHandler(handler)

	return listAll(ghInformer)
}

func listAll(ghInformer *injection.TypedInformer[v1alpha1.GithubBinding, *v1alpha1.GithubBinding]) psbinding.ListAll {
	return func() ([]psbinding.Bindable, error) {
		l, err := ghInformer.Lister().List(labels.Everything())
		if err != nil {
			return nil, err
		}
		bl := make([]psbinding.Bindable, 0, len(l))
		for _, elt := range l {
			bl = append(bl, elt)
		}
		return bl, nil
	}
}

// informer is what a generated ghinformer.Get(ctx) returns in knative: the
// process's one GithubBinding informer.
func informer(ctx context.Context) *injection.TypedInformer[v1alpha1.GithubBinding, *v1alpha1.GithubBinding] {
	return injection.TypedInformerFor[v1alpha1.GithubBinding](ctx, v1alpha1.SchemeGroupVersion.WithResource("githubbindings"))
}
