package psbinding

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
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

func newTestAdmissionController(t *testing.T, bindings []Bindable, caBundle []byte) (*AdmissionController, *fake.Clientset) {
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
