package psbinding

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/webhook"
)

// AdmissionConfig is what an AdmissionReconciler needs. Fields without a
// stated default are required.
type AdmissionConfig struct {
	// Settings are what the admission controller shares with the kind's
	// BaseReconciler: WithContext, Shapes, SelectorMode, FieldManager
	// (also of the webhook configuration it writes) and
	// ExcludedNamespaces. Nil ExcludedNamespaces means KubeNamespaces
	// unless CallInKubeNamespaces is set; SystemNamespace is excluded
	// always.
	Settings

	// ConfigurationName is the MutatingWebhookConfiguration the controller
	// programs; it is installed beforehand (see config/) and names the
	// webhook, its client config and its failure policy.
	ConfigurationName string
	// WebhookName is the webhook within it. Default: ConfigurationName.
	WebhookName string
	// Path is the handler path the webhook server routes to Admit.
	Path string
	// ListAll lists every Binding of the kind.
	ListAll ListAll
	// KubeClient updates the webhook configuration.
	KubeClient kubernetes.Interface
	// ConfigurationLister reads the configuration from an informer limited
	// to it (injection.NamedKubeInformerFactory); enqueue the controller on
	// that informer's events, and an edit or a re-created configuration is
	// repaired within seconds. Default: a GET on each reconcile, which sees
	// an edit only at the next Binding change.
	ConfigurationLister admissionlisters.MutatingWebhookConfigurationLister
	// Mapper names the subjects' resources in the webhook's rules.
	Mapper meta.RESTMapper
	// SecretLister reads the CA bundle from the certificates Secret
	// SystemNamespace/SecretName, key CAKey. NewAdmissionController takes
	// SecretName and CAKey from webhook.GetOptions, as the webhook server
	// and the certificates reconciler of the process do.
	SecretLister corelisters.SecretLister
	SecretName   string
	// CAKey is the Secret's CA bundle key. Default:
	// certificates.DefaultDataKeys().CACert.
	CAKey string
	// SystemNamespace is where the webhook runs; it is never mutated, and
	// the webhook is never called there.
	SystemNamespace string
	// CallInKubeNamespaces lets the webhook be called in KubeNamespaces
	// when Bindings there need it; by default it never is.
	CallInKubeNamespaces bool
	// MaxSelectorNamespaces bounds the namespaces the namespaceSelector
	// names; past it the selector covers every namespace but the protected
	// ones (logged, and counted by Observer). Default:
	// DefaultMaxSelectorNamespaces.
	MaxSelectorNamespaces int
	// Observer, if set, is told how the webhook is scoped, for metrics.
	// Nil means the controller.Observer of the reconcile's context when it
	// is also an AdmissionObserver (as injection/sharedmain's metrics
	// are), else none.
	Observer AdmissionObserver
	// Logger receives index and configuration problems. Default: none.
	Logger *zap.Logger
	// BindingResource is the Bindings' resource, under which admission
	// records what it applied in each subject's duck.BoundAnnotation (the
	// record the reconciler reads to know what a Binding bound). Default:
	// found through Mapper from the kind of the listed Bindings.
	BindingResource schema.GroupResource
	// CallOnOwnPatches keeps the webhook called for the patches the
	// process's reconcilers send to subjects. By default it is not: the
	// webhook carries the match condition OwnPatchesCondition, which lets
	// the kube-apiserver skip it for an UPDATE whose field manager is the
	// controller's (Settings.FieldManager). Such a patch already carries its
	// Binding's Do and records it, so calling the webhook on it only costs
	// a round trip per subject (1,000 calls to bind 1,000 subjects); other
	// Bindings that select the subject bind it through their own
	// reconcilers. A client that sets the same field manager skips the
	// webhook too, which gives it nothing it does not have already: any
	// writer of a subject can opt it out of both paths with ExcludeLabel.
	CallOnOwnPatches bool
	// WebhookOff, if set, says when another admission path has the kind
	// (a declarative kind's MutatingAdmissionPolicy, seen in force): while
	// it returns true the webhook is programmed with no rules, so the
	// kube-apiserver no longer calls it, and the rest of the
	// configuration is kept as programmed. Default: never.
	WebhookOff func() bool
}

// AdmissionReconciler binds subjects as they are created or updated. It is
// both a controller.Reconciler, whose reconcile lists all Bindings, rebuilds
// the index Admit consults and (on the leader only) reprograms the webhook
// configuration, and the webhook.Admitter the server routes
// Path to. Every replica keeps the index, so every replica answers.
//
// It is the one writer of its webhook's caBundle, and so the
// certificates.Publisher the certificates reconciler waits for before it
// signs under a new CA.
type AdmissionReconciler struct {
	controller.LeaderAwareFuncs
	admitter
	cfg AdmissionConfig
	// indexed counts the Bindings in the index Admit consults.
	indexed atomic.Int64
	// fellBack is whether the namespaceSelector last programmed covers
	// every namespace but the protected ones.
	fellBack atomic.Bool
	// lastIndex is how long the last Reconcile took to list the Bindings
	// and index them, in nanoseconds (BindingEventDelay).
	lastIndex atomic.Int64
}

// MaxBindingEventDelay bounds BindingEventDelay.
const MaxBindingEventDelay = 250 * time.Millisecond

// BindingEventDelay is how long the controller should wait, after an event
// of a Binding, before it reconciles: ten times as long as the last
// reconcile took to list and index the Bindings, at most
// MaxBindingEventDelay. Each reconcile indexes every Binding and checks the
// configuration against all of them, so a stream of Binding events (a
// thousand Bindings created, each then given its finalizer) reconciled one
// by one costs the number of Bindings times the number of events; waiting
// lets the events that arrive meanwhile share one reconcile, and keeps the
// indexing to about a tenth of a core however fast they come. With few
// Bindings indexing takes microseconds and so does the wait; the
// configuration's writes, which wait on the API server and not on the CPU,
// do not count.
func (ac *AdmissionReconciler) BindingEventDelay() time.Duration {
	return min(10*time.Duration(ac.lastIndex.Load()), MaxBindingEventDelay)
}

// AdmissionController is AdmissionReconciler's former name.
//
// Deprecated: use AdmissionReconciler. The old name is kept for code written
// against earlier bindkit releases.
type AdmissionController = AdmissionReconciler

var (
	_ controller.Reconciler  = (*AdmissionReconciler)(nil)
	_ controller.LeaderAware = (*AdmissionReconciler)(nil)
	_ webhook.Admitter       = (*AdmissionReconciler)(nil)
	_ webhook.Syncer         = (*AdmissionReconciler)(nil)
	_ certificates.Publisher = (*AdmissionReconciler)(nil)
)

// NewAdmissionReconciler checks cfg and returns the controller, for callers
// that wire it by hand; NewAdmissionController does the wiring from a
// context. Run it on a controller.Impl whose key is cfg.ConfigurationName
// (see Key), enqueued on every change of a Binding and of the certificates
// Secret.
func NewAdmissionReconciler(cfg AdmissionConfig) (*AdmissionReconciler, error) {
	cfg.WebhookName = cmp.Or(cfg.WebhookName, cfg.ConfigurationName)
	cfg.CAKey = cmp.Or(cfg.CAKey, certificates.DefaultDataKeys().CACert)
	cfg.MaxSelectorNamespaces = cmp.Or(cfg.MaxSelectorNamespaces, DefaultMaxSelectorNamespaces)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	var missing []string
	for name, ok := range map[string]bool{
		"ConfigurationName": cfg.ConfigurationName != "", "Path": cfg.Path != "", "ListAll": cfg.ListAll != nil,
		"KubeClient": cfg.KubeClient != nil, "Mapper": cfg.Mapper != nil, "SecretLister": cfg.SecretLister != nil,
		"SecretName": cfg.SecretName != "", "SystemNamespace": cfg.SystemNamespace != "",
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("psbinding: admission controller %q: missing %v", cfg.ConfigurationName, missing)
	}
	if cfg.MaxSelectorNamespaces < 0 {
		return nil, fmt.Errorf("psbinding: admission controller %q: MaxSelectorNamespaces %d is negative", cfg.ConfigurationName, cfg.MaxSelectorNamespaces)
	}
	ac := &AdmissionReconciler{cfg: cfg}
	ac.shapes = cfg.Shapes
	ac.withContext = cfg.WithContext
	ac.rollout = cfg.Rollout
	if cfg.Validate != nil {
		ac.validate = cfg.Settings.validate
	}
	ac.excludedNamespaces = admissionExcluded(cfg)
	ac.logger = cfg.Logger
	if !cfg.BindingResource.Empty() {
		ac.resource.Store(&cfg.BindingResource)
	}
	ac.PromoteFunc = func(enqueue func(string)) { enqueue(ac.Key()) }
	return ac, nil
}

// admissionExcluded is where admission never mutates: the Settings'
// ExcludedNamespaces (nil: KubeNamespaces, unless CallInKubeNamespaces),
// and the system namespace always.
func admissionExcluded(cfg AdmissionConfig) []string {
	excluded := slices.Clone(cfg.ExcludedNamespaces)
	if excluded == nil && !cfg.CallInKubeNamespaces {
		excluded = slices.Clone(KubeNamespaces)
	}
	return append(excluded, cfg.SystemNamespace)
}

// Key is the one work-queue key the controller reconciles.
func (ac *AdmissionReconciler) Key() string { return ac.cfg.ConfigurationName }

// Path implements webhook.Admitter.
func (ac *AdmissionReconciler) Path() string { return ac.cfg.Path }

// Admit implements webhook.Admitter.
func (ac *AdmissionReconciler) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return ac.admit(ctx, req)
}

// HasSynced implements webhook.Syncer: Admit can decide once the Bindings
// have been listed.
func (ac *AdmissionReconciler) HasSynced() bool { return ac.hasIndex() }

// Reconcile implements controller.Reconciler.
func (ac *AdmissionReconciler) Reconcile(ctx context.Context, _ string) error {
	start := time.Now()
	bindings, err := ac.cfg.ListAll()
	if err != nil {
		return fmt.Errorf("admission controller %s: list bindings: %w", ac.cfg.ConfigurationName, err)
	}
	ac.learnResource(bindings)
	left := ac.setIndex(bindings)
	ac.lastIndex.Store(int64(time.Since(start)))
	ac.indexed.Store(int64(len(bindings) - len(left)))
	for _, err := range left {
		// The Binding's own reconciler reports this on its status.
		ac.cfg.Logger.Info("binding left out of the admission index", zap.Error(err))
	}
	if !ac.IsLeader() {
		return nil
	}
	// The configuration covers what the index filed: a Binding admission
	// never applies is never a reason to call the webhook.
	return ac.reconcileConfiguration(ctx, ac.index.Load().filed)
}

// fieldManager is the field manager of the controller's writes:
// AdmissionConfig.FieldManager, else the process's
// (controller.WithFieldManager), else DefaultFieldManager.
func (ac *AdmissionReconciler) fieldManager(ctx context.Context) string {
	return ac.cfg.Settings.fieldManager(ctx)
}

// IndexedBindings returns how many Bindings the index Admit consults
// holds: those listed at the last reconcile, less those that could not be
// indexed. Every replica keeps the index, so every replica reports it.
func (ac *AdmissionReconciler) IndexedBindings() int { return int(ac.indexed.Load()) }

// BindingResource returns the Bindings' resource (AdmissionConfig's, or
// the one learned from the first Binding listed), or the empty
// GroupResource while it is unknown.
func (ac *AdmissionReconciler) BindingResource() schema.GroupResource {
	if gr := ac.resource.Load(); gr != nil {
		return *gr
	}
	return schema.GroupResource{}
}

// learnResource finds the Bindings' resource from the kind of the first
// Binding that carries one, once.
func (ac *AdmissionReconciler) learnResource(bindings []Bindable) {
	if ac.resource.Load() != nil {
		return
	}
	for _, b := range bindings {
		gvk := b.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			continue
		}
		mapping, err := ac.cfg.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			ac.cfg.Logger.Warn("cannot map the Bindings' kind; admission does not record what it binds", zap.Stringer("kind", gvk), zap.Error(err))
			return
		}
		gr := mapping.Resource.GroupResource()
		ac.resource.Store(&gr)
		return
	}
}

// String names the configuration the controller programs, for logs.
func (ac *AdmissionReconciler) String() string {
	return "MutatingWebhookConfiguration " + ac.cfg.ConfigurationName
}

// PublishedCABundle implements certificates.Publisher: the caBundle of the
// webhook as the kube-apiserver reads it now. Nothing is published, and
// nothing constrains the certificates reconciler, while the configuration
// is not installed or its webhook has no rule (so it is never called).
func (ac *AdmissionReconciler) PublishedCABundle() ([]byte, bool, error) {
	current, err := ac.configuration(context.Background())
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	i := slices.IndexFunc(current.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == ac.cfg.WebhookName })
	if i < 0 || len(current.Webhooks[i].Rules) == 0 {
		return nil, false, nil
	}
	return current.Webhooks[i].ClientConfig.CABundle, true, nil
}

// configuration reads the installed configuration: from the lister when
// there is one, else from the API server. The result is shared; copy it
// before changing it.
func (ac *AdmissionReconciler) configuration(ctx context.Context) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	if ac.cfg.ConfigurationLister != nil {
		return ac.cfg.ConfigurationLister.Get(ac.cfg.ConfigurationName)
	}
	return ac.cfg.KubeClient.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, ac.cfg.ConfigurationName, metav1.GetOptions{})
}

// reconcileConfiguration writes the webhook configuration when what bindkit
// owns in it differs from what the Bindings and the CA bundle call for.
func (ac *AdmissionReconciler) reconcileConfiguration(ctx context.Context, bindings []Bindable) error {
	current, err := ac.configuration(ctx)
	if apierrors.IsNotFound(err) && ac.cfg.ConfigurationLister != nil {
		// Its creation is an informer event that brings us back.
		ac.cfg.Logger.Info("webhook configuration not installed; waiting for it", zap.String("configuration", ac.cfg.ConfigurationName))
		return nil
	}
	if err != nil {
		return fmt.Errorf("admission controller: MutatingWebhookConfiguration %s: %w", ac.cfg.ConfigurationName, err)
	}
	caBundle, err := ac.caBundle(current)
	if err != nil {
		return err
	}
	if ac.cfg.WebhookOff != nil && ac.cfg.WebhookOff() {
		bindings = nil // no rules: the other path admits
	}
	resources, namespaces := ac.scope(bindings)
	spec := webhookSpec{
		webhookName: ac.cfg.WebhookName,
		path:        ac.cfg.Path,
		caBundle:    caBundle,
		mode:        ac.cfg.SelectorMode,
		protected:   ac.protected(),
		namespaces:  namespaces,
		resources:   resources,
	}
	if !ac.cfg.CallOnOwnPatches {
		spec.skipPatchesBy = ac.fieldManager(ctx)
	}
	if len(namespaces) > ac.cfg.MaxSelectorNamespaces {
		spec.namespaces, spec.allNamespaces = nil, true
	}
	if ac.fellBack.Swap(spec.allNamespaces) != spec.allNamespaces && spec.allNamespaces {
		ac.cfg.Logger.Warn("webhook namespaceSelector falls back to every namespace but the protected ones: an outage of the webhook now blocks creates in namespaces without Bindings too",
			zap.String("configuration", ac.cfg.ConfigurationName), zap.Int("namespaces", len(namespaces)), zap.Int("maxSelectorNamespaces", ac.cfg.MaxSelectorNamespaces))
	}
	ac.admissionObserverIn(ctx).WebhookScoped(ac.cfg.ConfigurationName, len(namespaces), spec.allNamespaces)
	desired, err := desiredWebhookConfiguration(current, spec)
	if err != nil {
		return controller.NewPermanentError(err)
	}
	if equality.Semantic.DeepEqual(current, desired) {
		return nil
	}
	if _, err := ac.cfg.KubeClient.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, desired, metav1.UpdateOptions{FieldManager: ac.fieldManager(ctx)}); err != nil {
		return fmt.Errorf("admission controller: update MutatingWebhookConfiguration %s: %w", ac.cfg.ConfigurationName, err)
	}
	ac.cfg.Logger.Info("webhook configuration programmed", zap.String("configuration", ac.cfg.ConfigurationName),
		zap.Int("resources", len(resources)), zap.Int("namespaces", len(namespaces)), zap.Bool("allNamespaces", spec.allNamespaces))
	return nil
}

// caBundle is the bundle to publish: the certificates Secret's. While the
// Secret is missing (the certificates reconciler re-creates it, which
// brings us back) the installed bundle stays, so the rest of the
// configuration can still be repaired; with neither, the webhook is not
// programmed at all, since the kube-apiserver could not trust it.
func (ac *AdmissionReconciler) caBundle(current *admissionregistrationv1.MutatingWebhookConfiguration) ([]byte, error) {
	secret, err := ac.cfg.SecretLister.Secrets(ac.cfg.SystemNamespace).Get(ac.cfg.SecretName)
	switch {
	case err == nil && len(secret.Data[ac.cfg.CAKey]) > 0:
		return certificates.KeepTrusted(secret.Data[ac.cfg.CAKey], publishedCABundle(current, ac.cfg.WebhookName), time.Now()), nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("admission controller %s: certificates secret %s/%s: %w", ac.cfg.ConfigurationName, ac.cfg.SystemNamespace, ac.cfg.SecretName, err)
	}
	for _, w := range current.Webhooks {
		if w.Name == ac.cfg.WebhookName && len(w.ClientConfig.CABundle) > 0 {
			return w.ClientConfig.CABundle, nil
		}
	}
	// The certificates controller writes it at start-up: a wait, not a
	// failure.
	return nil, controller.NewWaiting(fmt.Errorf("admission controller %s: waiting: certificates secret %s/%s has no %q yet", ac.cfg.ConfigurationName, ac.cfg.SystemNamespace, ac.cfg.SecretName, ac.cfg.CAKey))
}

// publishedCABundle is the caBundle current gives the webhook named name.
func publishedCABundle(current *admissionregistrationv1.MutatingWebhookConfiguration, name string) []byte {
	for _, w := range current.Webhooks {
		if w.Name == name {
			return w.ClientConfig.CABundle
		}
	}
	return nil
}

// protected are the namespaces the webhook is never called in.
func (ac *AdmissionReconciler) protected() []string {
	out := []string{ac.cfg.SystemNamespace}
	if !ac.cfg.CallInKubeNamespaces {
		out = append(out, KubeNamespaces...)
	}
	return out
}

// scope returns the resources of the subject kinds of bindings (those the
// index filed: their subjects validate and stay in their namespaces) and
// the namespaces where they apply: where each lives, unless its kind is
// not served or the namespace is protected. Both are sorted.
func (ac *AdmissionReconciler) scope(bindings []Bindable) ([]schema.GroupVersionResource, []string) {
	protected := ac.protected()
	var namespaces []string
	resources, served := ac.subjectResources(bindings)
	for i, b := range bindings {
		if served[i] && !slices.Contains(protected, b.GetNamespace()) {
			namespaces = append(namespaces, b.GetNamespace())
		}
	}
	return resources, sortedSet(namespaces)
}

// subjectResources maps every Binding's subject kind to its resource, and
// reports, in the order of bindings, which have a served kind. A kind the API server does not
// serve is left out: the Binding's reconciler marks it, and the
// configuration still covers every other kind.
func (ac *AdmissionReconciler) subjectResources(bindings []Bindable) ([]schema.GroupVersionResource, []bool) {
	mapped := map[schema.GroupKind]bool{}
	served := make([]bool, len(bindings))
	var out []schema.GroupVersionResource
	for i, b := range bindings {
		ref := subjectOfBindable(b)
		gvk, err := ref.GroupVersionKind()
		if err != nil || ref.Kind == "" {
			continue
		}
		ok, seen := mapped[gvk.GroupKind()]
		if !seen {
			mapping, err := ac.cfg.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			switch {
			case err == nil:
				out = append(out, mapping.Resource)
				ok = true
			case !meta.IsNoMatchError(err):
				ac.cfg.Logger.Warn("cannot map subject kind", zap.Stringer("kind", gvk), zap.Error(err))
			}
			mapped[gvk.GroupKind()] = ok
		}
		served[i] = ok
	}
	return out, served
}
