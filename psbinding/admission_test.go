package psbinding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/tracker"
)

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, meta.RESTScopeNamespace)
	return m
}

func secretLister(t *testing.T, secrets ...*corev1.Secret) corelisters.SecretLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range secrets {
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewSecretLister(indexer)
}

func newTestAdmissionController(t *testing.T, bindings []Bindable, caBundle []byte) (*AdmissionReconciler, *fake.Clientset) {
	t.Helper()
	kube := fake.NewClientset(installedConfig(admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook"},
	}, nil))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bindkit-system", Name: "webhook-certs"},
		Data: map[string][]byte{"ca-cert.pem": caBundle}}
	ac, err := NewAdmissionReconciler(AdmissionConfig{
		ConfigurationName: "bindings.bindkit.dev",
		Path:              "/bindings",
		ListAll:           func() ([]Bindable, error) { return bindings, nil },
		KubeClient:        kube,
		Mapper:            testMapper(),
		SecretLister:      secretLister(t, secret),
		SecretName:        "webhook-certs",
		SystemNamespace:   "bindkit-system",
	})
	if err != nil {
		t.Fatal(err)
	}
	return ac, kube
}

func updates(kube *fake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

func TestAdmissionControllerReconcile(t *testing.T) {
	bindings := []Bindable{
		newEnvBinding("ns", "a", deploymentRef("ns", "web", nil), "A", "1"),
		newEnvBinding("ns", "b", tracker.Reference{APIVersion: "batch/v1", Kind: "CronJob", Namespace: "ns", Name: "nightly"}, "B", "2"),
		newEnvBinding("ns", "c", tracker.Reference{APIVersion: "example.com/v1", Kind: "Missing", Namespace: "ns", Name: "x"}, "C", "3"),
	}
	ac, kube := newTestAdmissionController(t, bindings, []byte("CA"))
	ctx := context.Background()

	// A follower builds the index but never writes.
	if err := ac.Reconcile(ctx, ac.Key()); err != nil {
		t.Fatalf("follower Reconcile: %v", err)
	}
	if !ac.HasSynced() {
		t.Error("HasSynced = false after a reconcile")
	}
	if n := updates(kube); n != 0 {
		t.Fatalf("follower issued %d updates", n)
	}

	var enqueued []string
	ac.Promote(func(key string) { enqueued = append(enqueued, key) })
	if diff := cmp.Diff([]string{"bindings.bindkit.dev"}, enqueued); diff != "" {
		t.Errorf("Promote enqueued (-want +got):\n%s", diff)
	}
	if err := ac.Reconcile(ctx, ac.Key()); err != nil {
		t.Fatalf("leader Reconcile: %v", err)
	}
	got, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "bindings.bindkit.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wh := got.Webhooks[1]
	var resources []string
	for _, r := range wh.Rules {
		for _, res := range r.Resources {
			resources = append(resources, r.APIGroups[0]+"/"+res)
		}
	}
	if diff := cmp.Diff([]string{"apps/deployments", "batch/cronjobs"}, resources); diff != "" {
		t.Errorf("rules cover (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ptr.To("/bindings"), wh.ClientConfig.Service.Path); diff != "" {
		t.Errorf("service path (-want +got):\n%s", diff)
	}
	if string(wh.ClientConfig.CABundle) != "CA" {
		t.Errorf("caBundle = %q, want CA", wh.ClientConfig.CABundle)
	}
	if n := updates(kube); n != 1 {
		t.Fatalf("first leader reconcile issued %d updates, want 1", n)
	}

	// Nothing changed: no update.
	if err := ac.Reconcile(ctx, ac.Key()); err != nil {
		t.Fatalf("second Reconcile: %v", err)
	}
	if n := updates(kube); n != 1 {
		t.Errorf("second reconcile with nothing changed issued an update (%d in all)", n)
	}
}

// TestBindingEventDelay checks the wait before a Binding event's reconcile:
// none before the first reconcile, ten times the last one's duration after
// it, and never more than MaxBindingEventDelay.
func TestBindingEventDelay(t *testing.T) {
	slow := false
	ac, _ := newTestAdmissionController(t, nil, []byte("ca"))
	ac.cfg.ListAll = func() ([]Bindable, error) {
		if slow {
			time.Sleep(30 * time.Millisecond)
		}
		return nil, nil
	}
	if got := ac.BindingEventDelay(); got != 0 {
		t.Errorf("before any reconcile: delay %v, want 0", got)
	}
	start := time.Now()
	if err := ac.Reconcile(context.Background(), ac.Key()); err != nil {
		t.Fatal(err)
	}
	if got, most := ac.BindingEventDelay(), 10*time.Since(start); got <= 0 || got > most {
		t.Errorf("after a reconcile: delay %v, want more than 0 and at most %v", got, most)
	}
	slow = true
	if err := ac.Reconcile(context.Background(), ac.Key()); err != nil {
		t.Fatal(err)
	}
	if got := ac.BindingEventDelay(); got != MaxBindingEventDelay {
		t.Errorf("after a 30 ms reconcile: delay %v, want MaxBindingEventDelay %v", got, MaxBindingEventDelay)
	}
}

func TestAdmissionControllerReconcileErrors(t *testing.T) {
	ac, _ := newTestAdmissionController(t, nil, nil)
	ac.Promote(func(string) {})
	err := ac.Reconcile(context.Background(), ac.Key())
	if err == nil || !strings.Contains(err.Error(), `certificates secret bindkit-system/webhook-certs has no "ca-cert.pem" yet`) {
		t.Errorf("Reconcile without a CA bundle: err = %v", err)
	}
}

func TestNewAdmissionControllerNamesMissingFields(t *testing.T) {
	_, err := NewAdmissionReconciler(AdmissionConfig{ConfigurationName: "cfg", Path: "/p"})
	want := `psbinding: admission controller "cfg": missing [KubeClient ListAll Mapper SecretLister SecretName SystemNamespace]`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestAdmissionControllerCallsWebhookOnlyWhereBindingsApply: the
// namespaceSelector names the namespaces where a Binding of the kind can
// apply, and nothing else.
func TestAdmissionControllerCallsWebhookOnlyWhereBindingsApply(t *testing.T) {
	byName := func(ns, name string) Bindable {
		return newEnvBinding(ns, name, deploymentRef("", "web", nil), "A", "1")
	}
	tests := []struct {
		name      string
		bindings  []Bindable
		kubeNS    bool
		max       int
		wantIn    []string // nil: no In requirement
		wantRules bool
	}{
		{name: "no bindings: matches nothing"},
		{name: "namespaces with bindings, sorted, once each",
			bindings: []Bindable{byName("team-b", "x"), byName("team-a", "y"), byName("team-b", "z")},
			wantIn:   []string{"team-a", "team-b"}, wantRules: true},
		{name: "cross-namespace subject adds neither namespace",
			bindings: []Bindable{byName("team-a", "ok"), newEnvBinding("team-c", "reach", deploymentRef("team-d", "web", nil), "A", "1")},
			wantIn:   []string{"team-a"}, wantRules: true},
		{name: "kind not served adds no namespace",
			bindings: []Bindable{byName("team-a", "ok"), newEnvBinding("team-e", "odd", tracker.Reference{APIVersion: "example.com/v1", Kind: "Missing", Name: "x"}, "A", "1")},
			wantIn:   []string{"team-a"}, wantRules: true},
		{name: "invalid reference adds no namespace",
			bindings: []Bindable{newEnvBinding("team-f", "bad", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment"}, "A", "1")}},
		{name: "kube and system namespaces never",
			bindings: []Bindable{byName("kube-system", "a"), byName("kube-public", "b"), byName("kube-node-lease", "c"), byName("bindkit-system", "d")}},
		{name: "kube namespaces when opted in, the system namespace still never",
			bindings: []Bindable{byName("kube-system", "a"), byName("bindkit-system", "d")}, kubeNS: true,
			wantIn: []string{"kube-system"}, wantRules: true},
		{name: "past the bound: every namespace but the protected ones",
			bindings: []Bindable{byName("team-a", "x"), byName("team-b", "y"), byName("team-c", "z")}, max: 2,
			wantRules: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ac, kube := newTestAdmissionController(t, tt.bindings, []byte("CA"))
			ac.cfg.CallInKubeNamespaces = tt.kubeNS
			if tt.max != 0 {
				ac.cfg.MaxSelectorNamespaces = tt.max
			}
			scoped := &scopeRecorder{}
			ac.cfg.Observer = scoped
			ac.Promote(func(string) {})
			if err := ac.Reconcile(t.Context(), ac.Key()); err != nil {
				t.Fatal(err)
			}
			wantN := len(tt.wantIn)
			if tt.max != 0 {
				wantN = len(tt.bindings) // each in its own namespace
			}
			if want := fmt.Sprintf("%d namespaces, all=%v", wantN, tt.max != 0); scoped.last != want {
				t.Errorf("observer told %q, want %q", scoped.last, want)
			}
			got, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "bindings.bindkit.dev", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wh := got.Webhooks[1]
			var in, notIn []string
			for _, r := range wh.NamespaceSelector.MatchExpressions {
				if r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpIn {
					in = r.Values
				}
				if r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpNotIn {
					notIn = r.Values
				}
			}
			if diff := cmp.Diff(tt.wantIn, in); diff != "" {
				t.Errorf("namespaces the webhook is called in (-want +got):\n%s", diff)
			}
			wantNotIn := []string{"bindkit-system", "kube-node-lease", "kube-public", "kube-system"}
			if tt.kubeNS {
				wantNotIn = []string{"bindkit-system"}
			}
			if diff := cmp.Diff(wantNotIn, notIn); diff != "" {
				t.Errorf("namespaces never called (-want +got):\n%s", diff)
			}
			if gotRules := len(wh.Rules) > 0; gotRules != tt.wantRules {
				t.Errorf("webhook has rules = %v, want %v", gotRules, tt.wantRules)
			}
		})
	}
}

// configCache is a lister over one configuration that the test syncs from
// the fake clientset, as an informer would.
type configCache struct {
	indexer cache.Indexer
}

func newConfigCache() *configCache {
	return &configCache{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
}

func (c *configCache) sync(t *testing.T, kube *fake.Clientset, name string) {
	t.Helper()
	got, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.indexer.Delete(&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
	case err != nil:
		t.Fatal(err)
	default:
		c.indexer.Update(got)
	}
}

// TestAdmissionControllerRestoresWhatItOwns: an admin's edit of what
// bindkit owns is undone; what the admin owns stays; once settled, no
// further update.
func TestAdmissionControllerRestoresWhatItOwns(t *testing.T) {
	bindings := []Bindable{newEnvBinding("team-a", "gh", deploymentRef("", "web", nil), "A", "1")}
	ac, kube := newTestAdmissionController(t, bindings, []byte("CA"))
	configs := newConfigCache()
	ac.cfg.ConfigurationLister = admissionlisters.NewMutatingWebhookConfigurationLister(configs.indexer)
	client := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	reconcile := func() {
		t.Helper()
		configs.sync(t, kube, "bindings.bindkit.dev")
		if err := ac.Reconcile(t.Context(), ac.Key()); err != nil {
			t.Fatal(err)
		}
		configs.sync(t, kube, "bindings.bindkit.dev")
	}
	ac.Promote(func(string) {})
	reconcile()
	programmed, err := client.Get(t.Context(), "bindings.bindkit.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The admin adds a rule, drops our selector requirements, changes the
	// path and the caBundle, and sets what is theirs.
	edited := programmed.DeepCopy()
	wh := &edited.Webhooks[1]
	wh.Rules = append(wh.Rules, admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}})
	wh.ClientConfig.CABundle = []byte("OTHER")
	wh.ClientConfig.Service.Path = ptr.To("/elsewhere")
	admins := metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"frozen"}}
	wh.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{admins}}
	wh.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	wh.TimeoutSeconds = ptr.To[int32](3)
	wh.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-dry-run", Expression: "!request.dryRun"}}
	if _, err := client.Update(t.Context(), edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	reconcile()
	restored, err := client.Get(t.Context(), "bindings.bindkit.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := programmed.DeepCopy()
	want.Webhooks[1].FailurePolicy = wh.FailurePolicy
	want.Webhooks[1].TimeoutSeconds = wh.TimeoutSeconds
	// The admin's conditions replaced bindkit's, which comes back after them.
	if diff := cmp.Diff([]admissionregistrationv1.MatchCondition{{Name: OwnPatchesCondition, Expression: ownPatchesExpression(DefaultFieldManager)}}, programmed.Webhooks[1].MatchConditions); diff != "" {
		t.Errorf("programmed match conditions (-want +got):\n%s", diff)
	}
	want.Webhooks[1].MatchConditions = append(slices.Clone(wh.MatchConditions), programmed.Webhooks[1].MatchConditions...)
	want.Webhooks[1].NamespaceSelector.MatchExpressions = append(want.Webhooks[1].NamespaceSelector.MatchExpressions, admins)
	if diff := cmp.Diff(want.Webhooks, restored.Webhooks); diff != "" {
		t.Errorf("after the admin's edit (-want +got):\n%s", diff)
	}
	if n := updates(kube); n != 1 {
		t.Errorf("%d updates to restore, want 1", n)
	}
	reconcile()
	reconcile()
	if n := updates(kube); n != 1 {
		t.Errorf("%d updates in all after two more reconciles with nothing changed, want still 1", n)
	}

	// Deleted: nothing to do until it is installed again.
	if err := client.Delete(t.Context(), "bindings.bindkit.dev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if _, published, err := ac.PublishedCABundle(); published || err != nil {
		t.Errorf("PublishedCABundle of a deleted configuration: published %v, err %v", published, err)
	}
}

func TestPublishedCABundle(t *testing.T) {
	bindings := []Bindable{newEnvBinding("team-a", "gh", deploymentRef("", "web", nil), "A", "1")}
	ac, _ := newTestAdmissionController(t, bindings, []byte("CA"))
	// Installed but never programmed: no rule, nothing calls it.
	if bundle, published, err := ac.PublishedCABundle(); published || err != nil {
		t.Errorf("before programming: bundle %q published %v err %v, want nothing published", bundle, published, err)
	}
	ac.Promote(func(string) {})
	if err := ac.Reconcile(t.Context(), ac.Key()); err != nil {
		t.Fatal(err)
	}
	if bundle, published, err := ac.PublishedCABundle(); string(bundle) != "CA" || !published || err != nil {
		t.Errorf("after programming: bundle %q published %v err %v, want CA", bundle, published, err)
	}
	if got := ac.String(); got != "MutatingWebhookConfiguration bindings.bindkit.dev" {
		t.Errorf("String() = %q", got)
	}
}

// TestAdmissionControllerKeepsBundleWhileSecretIsGone: the Secret deleted,
// the rest of the configuration is still repaired and the installed
// caBundle stays.
func TestAdmissionControllerKeepsBundleWhileSecretIsGone(t *testing.T) {
	bindings := []Bindable{newEnvBinding("team-a", "gh", deploymentRef("", "web", nil), "A", "1")}
	ac, kube := newTestAdmissionController(t, bindings, []byte("CA"))
	ac.Promote(func(string) {})
	if err := ac.Reconcile(t.Context(), ac.Key()); err != nil {
		t.Fatal(err)
	}
	ac.cfg.SecretLister = secretLister(t)
	client := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cfg, _ := client.Get(t.Context(), "bindings.bindkit.dev", metav1.GetOptions{})
	cfg.Webhooks[1].Rules = nil
	if _, err := client.Update(t.Context(), cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ac.Reconcile(t.Context(), ac.Key()); err != nil {
		t.Fatal(err)
	}
	cfg, _ = client.Get(t.Context(), "bindings.bindkit.dev", metav1.GetOptions{})
	if len(cfg.Webhooks[1].Rules) == 0 || string(cfg.Webhooks[1].ClientConfig.CABundle) != "CA" {
		t.Errorf("rules %v, caBundle %q: want rules restored and the installed bundle kept", cfg.Webhooks[1].Rules, cfg.Webhooks[1].ClientConfig.CABundle)
	}
}

func TestAdmissionControllerUninstallEmptiesItsRules(t *testing.T) {
	ac, kube := newTestAdmissionController(t, []Bindable{newEnvBinding("ns", "a", deploymentRef("ns", "web", nil), "A", "1")}, []byte("CA"))
	ctx := context.Background()
	ac.Promote(func(string) {})
	if err := ac.Reconcile(ctx, ac.Key()); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	rules := func() [][]admissionregistrationv1.RuleWithOperations {
		got, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "bindings.bindkit.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]admissionregistrationv1.RuleWithOperations
		for _, w := range got.Webhooks {
			out = append(out, w.Rules)
		}
		return out
	}
	before := rules()
	if len(before[1]) == 0 {
		t.Fatal("no rules programmed")
	}
	if err := ac.Uninstall(ctx); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	after := rules()
	if len(after[1]) != 0 {
		t.Errorf("rules after Uninstall: %v", after[1])
	}
	if diff := cmp.Diff(before[0], after[0]); diff != "" {
		t.Errorf("another webhook of the configuration changed (-before +after):\n%s", diff)
	}
	if err := ac.Uninstall(ctx); err != nil {
		t.Errorf("second Uninstall: %v", err)
	}
}

// scopeRecorder is an AdmissionObserver that keeps the last call.
type scopeRecorder struct{ last string }

func (s *scopeRecorder) WebhookScoped(_ string, namespaces int, all bool) {
	s.last = fmt.Sprintf("%d namespaces, all=%v", namespaces, all)
}
