package psbinding

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/webhook"
)

// AdmissionConfig is what an AdmissionController needs. Fields without a
// stated default are required.
type AdmissionConfig struct {
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
	// WithContext, if set, prepares the context Do and Undo run in.
	WithContext BindableContext
	// KubeClient reads and updates the webhook configuration.
	KubeClient kubernetes.Interface
	// Mapper names the subjects' resources in the webhook's rules.
	Mapper meta.RESTMapper
	// SecretLister reads the CA bundle from the certificates Secret
	// SystemNamespace/SecretName, key CAKey.
	SecretLister corelisters.SecretLister
	SecretName   string
	// CAKey is the Secret's CA bundle key. Default:
	// certificates.DefaultDataKeys().CACert.
	CAKey string
	// SystemNamespace is where the webhook runs; it is never mutated.
	SystemNamespace string
	// SelectorMode chooses exclusion (the default) or inclusion of
	// namespaces.
	SelectorMode SelectorMode
	// Shapes finds the pod template of each subject kind; the zero value
	// knows the built-in shapes.
	Shapes duck.Shapes
	// Logger receives index and configuration problems. Default: none.
	Logger *zap.Logger
	// BindingResource is the Bindings' resource, under which admission
	// records what it applied in each subject's duck.BoundAnnotation (the
	// record the reconciler reads to know what a Binding bound). Default:
	// found through Mapper from the kind of the listed Bindings.
	BindingResource schema.GroupResource
}

// AdmissionController binds subjects as they are created or updated. It is
// both a controller.Reconciler, whose reconcile lists all Bindings, rebuilds
// the index Admit consults and (on the leader only) reprograms the webhook
// configuration, and the webhook.AdmissionController the server routes
// Path to. Every replica keeps the index, so every replica answers.
type AdmissionController struct {
	controller.LeaderAwareFuncs
	admitter
	cfg AdmissionConfig
}

var (
	_ controller.Reconciler       = (*AdmissionController)(nil)
	_ controller.LeaderAware      = (*AdmissionController)(nil)
	_ webhook.AdmissionController = (*AdmissionController)(nil)
	_ webhook.Syncer              = (*AdmissionController)(nil)
)

// NewAdmissionReconciler checks cfg and returns the controller, for callers
// that wire it by hand; NewAdmissionController does the wiring from a
// context. Run it on a controller.Impl whose key is cfg.ConfigurationName
// (see Key), enqueued on every change of a Binding and of the certificates
// Secret.
func NewAdmissionReconciler(cfg AdmissionConfig) (*AdmissionController, error) {
	cfg.WebhookName = cmp.Or(cfg.WebhookName, cfg.ConfigurationName)
	cfg.CAKey = cmp.Or(cfg.CAKey, certificates.DefaultDataKeys().CACert)
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
	ac := &AdmissionController{cfg: cfg}
	ac.shapes = cfg.Shapes
	ac.withContext = cfg.WithContext
	ac.excludedNamespace = cfg.SystemNamespace
	if !cfg.BindingResource.Empty() {
		ac.resource.Store(&cfg.BindingResource)
	}
	ac.PromoteFunc = func(enqueue func(string)) { enqueue(ac.Key()) }
	return ac, nil
}

// Key is the one work-queue key the controller reconciles.
func (ac *AdmissionController) Key() string { return ac.cfg.ConfigurationName }

// Path implements webhook.AdmissionController.
func (ac *AdmissionController) Path() string { return ac.cfg.Path }

// Admit implements webhook.AdmissionController.
func (ac *AdmissionController) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return ac.admit(ctx, req)
}

// HasSynced implements webhook.Syncer: Admit can decide once the Bindings
// have been listed.
func (ac *AdmissionController) HasSynced() bool { return ac.hasIndex() }

// Reconcile implements controller.Reconciler.
func (ac *AdmissionController) Reconcile(ctx context.Context, _ string) error {
	bindings, err := ac.cfg.ListAll()
	if err != nil {
		return fmt.Errorf("admission controller %s: list bindings: %w", ac.cfg.ConfigurationName, err)
	}
	ac.learnResource(bindings)
	for _, err := range ac.setIndex(bindings) {
		// The Binding's own reconciler reports this on its status.
		ac.cfg.Logger.Info("binding left out of the admission index", zap.Error(err))
	}
	if !ac.IsLeader() {
		return nil
	}
	return ac.reconcileConfiguration(ctx, bindings)
}

// learnResource finds the Bindings' resource from the kind of the first
// Binding that carries one, once.
func (ac *AdmissionController) learnResource(bindings []Bindable) {
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

// reconcileConfiguration writes the webhook configuration when it differs
// from what the Bindings and the CA bundle call for.
func (ac *AdmissionController) reconcileConfiguration(ctx context.Context, bindings []Bindable) error {
	secret, err := ac.cfg.SecretLister.Secrets(ac.cfg.SystemNamespace).Get(ac.cfg.SecretName)
	if err != nil {
		return fmt.Errorf("admission controller %s: certificates secret %s/%s: %w", ac.cfg.ConfigurationName, ac.cfg.SystemNamespace, ac.cfg.SecretName, err)
	}
	caBundle := secret.Data[ac.cfg.CAKey]
	if len(caBundle) == 0 {
		return fmt.Errorf("admission controller %s: certificates secret %s/%s has no %q yet", ac.cfg.ConfigurationName, ac.cfg.SystemNamespace, ac.cfg.SecretName, ac.cfg.CAKey)
	}
	client := ac.cfg.KubeClient.AdmissionregistrationV1().MutatingWebhookConfigurations()
	current, err := client.Get(ctx, ac.cfg.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("admission controller: MutatingWebhookConfiguration %s: %w", ac.cfg.ConfigurationName, err)
	}
	desired, err := desiredWebhookConfiguration(current, webhookSpec{
		webhookName:     ac.cfg.WebhookName,
		path:            ac.cfg.Path,
		caBundle:        caBundle,
		mode:            ac.cfg.SelectorMode,
		systemNamespace: ac.cfg.SystemNamespace,
		resources:       ac.subjectResources(bindings),
	})
	if err != nil {
		return controller.NewPermanentError(err)
	}
	if equality.Semantic.DeepEqual(current, desired) {
		return nil
	}
	if _, err := client.Update(ctx, desired, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("admission controller: update MutatingWebhookConfiguration %s: %w", ac.cfg.ConfigurationName, err)
	}
	return nil
}

// subjectResources maps every Binding's subject kind to its resource. A kind
// the API server does not serve is left out: the Binding's reconciler marks
// it, and the configuration still covers every other kind.
func (ac *AdmissionController) subjectResources(bindings []Bindable) []schema.GroupVersionResource {
	seen := map[schema.GroupKind]bool{}
	var out []schema.GroupVersionResource
	for _, b := range bindings {
		ref, _, _ := subjectOfBindable(b)
		if checkSubjectNamespace(b.GetNamespace(), b.GetName(), ref) != nil {
			continue // never applied, so never a reason to call the webhook
		}
		gvk, err := ref.GroupVersionKind()
		if err != nil || ref.Kind == "" || seen[gvk.GroupKind()] {
			continue
		}
		seen[gvk.GroupKind()] = true
		mapping, err := ac.cfg.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			if !meta.IsNoMatchError(err) {
				ac.cfg.Logger.Warn("cannot map subject kind", zap.Stringer("kind", gvk), zap.Error(err))
			}
			continue
		}
		out = append(out, mapping.Resource)
	}
	return out
}
