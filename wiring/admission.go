package wiring

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

// AdmissionOption changes a default of NewAdmissionController.
type AdmissionOption func(*psbinding.AdmissionConfig)

// WithSelectorMode chooses exclusion (the default) or inclusion of
// namespaces.
func WithSelectorMode(mode psbinding.SelectorMode) AdmissionOption {
	return func(c *psbinding.AdmissionConfig) { c.SelectorMode = mode }
}

// WithWebhookName names the webhook within the configuration. Default: the
// configuration's name.
func WithWebhookName(name string) AdmissionOption {
	return func(c *psbinding.AdmissionConfig) { c.WebhookName = name }
}

// WithShapes tells the admission controller where the pod template of
// custom subject kinds is.
func WithShapes(shapes duck.Shapes) AdmissionOption {
	return func(c *psbinding.AdmissionConfig) { c.Shapes = shapes }
}

// WithCallOnOwnPatches keeps the webhook called for the process's own
// patches of subjects (psbinding.AdmissionConfig.CallOnOwnPatches), for a process
// whose reconcilers share their field manager with clients that need the
// webhook.
func WithCallOnOwnPatches() AdmissionOption {
	return func(c *psbinding.AdmissionConfig) { c.CallOnOwnPatches = true }
}

// NewAdmissionController returns the Impl that keeps the admission index
// and the MutatingWebhookConfiguration name up to date; its Reconciler is
// the *psbinding.AdmissionReconciler that a webhook server routes path to.
// It has the arguments of knative's psbinding.NewAdmissionController.
//
// It reads the kube client, the RESTMapper, the system namespace and the
// informers from ctx (see package injection), and the certificates
// Secret's name and keys and whether to call the webhook in
// psbinding.KubeNamespaces from webhook.GetOptions(ctx), the settings the
// process's webhook server and certificates reconciler share. It calls gla
// with the handler to add to the Bindings' informer, watches the
// certificates Secret in the system namespace only, and watches the
// configuration itself through an informer limited to its name, so an edit
// or a re-created configuration is repaired within seconds. A context
// without them is a wiring mistake: it panics, naming what is missing, as
// it does for an AdmissionConfig that psbinding.NewAdmissionReconciler
// refuses.
func NewAdmissionController(ctx context.Context, name, path string, gla psbinding.GetListAll, withContext psbinding.BindableContext, opts ...AdmissionOption) *controller.Impl {
	cfg := psbinding.AdmissionConfig{Settings: psbinding.Settings{WithContext: withContext}}
	for _, opt := range opts {
		opt(&cfg)
	}
	return newAdmissionController(ctx, name, path, gla, cfg, nil, nil)
}

// newAdmissionController completes cfg, whose Settings and options the
// caller chose, with what ctx holds, and returns the Impl.
// built, if not nil, is given the AdmissionReconciler.
func newAdmissionController(ctx context.Context, name, path string, gla psbinding.GetListAll, cfg psbinding.AdmissionConfig, wrap func(*psbinding.AdmissionReconciler) controller.Reconciler, built *atomic.Pointer[psbinding.AdmissionReconciler]) *controller.Impl {
	logger := logging.FromContext(ctx)
	systemNamespace := injection.SystemNamespace(ctx)
	settings := webhook.GetOptions(ctx)
	secrets := injection.NamespacedKubeInformerFactory(ctx, systemNamespace).Core().V1().Secrets()
	configurations := injection.NamedKubeInformerFactory(ctx, name).Admissionregistration().V1().MutatingWebhookConfigurations()
	cfg.ConfigurationName = name
	cfg.Path = path
	cfg.KubeClient = injection.KubeClient(ctx)
	cfg.ConfigurationLister = configurations.Lister()
	cfg.Mapper = injection.RESTMapper(ctx)
	cfg.SecretLister = secrets.Lister()
	cfg.SecretName = settings.SecretName
	cfg.CAKey = settings.Keys.CACert
	cfg.SystemNamespace = systemNamespace
	cfg.CallInKubeNamespaces = settings.CallInKubeNamespaces
	cfg.Logger = logger
	if cfg.ExcludedNamespaces == nil {
		cfg.ExcludedNamespaces = ExcludedNamespaces(ctx)
	}
	var (
		impl *controller.Impl
		ac   *psbinding.AdmissionReconciler
	)
	// Handlers run once informers start, after impl and ac are set below.
	reprogram := controller.HandleAll(func(any) { impl.EnqueueKey(name) })
	// Only the Binding events that can change what admission does: each
	// one costs a rebuild of the index over every Binding, so they are
	// also given the time to arrive together.
	cfg.ListAll = gla(ctx, psbinding.IndexEventHandler(controller.HandleAll(func(any) {
		impl.EnqueueKeyAfter(name, ac.BindingEventDelay())
	})))
	ac, err := psbinding.NewAdmissionReconciler(cfg)
	if err != nil {
		panic(err)
	}
	if built != nil {
		built.Store(ac)
	}
	var r controller.Reconciler = ac
	if wrap != nil {
		r = wrap(ac)
	}
	impl = controller.NewImpl(r, logger, name)
	secrets.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: controller.FilterWithName(cfg.SecretName),
		Handler:    reprogram,
	})
	configurations.Informer().AddEventHandler(reprogram)
	return impl
}
