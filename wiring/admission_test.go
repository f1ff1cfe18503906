package wiring_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

// TestNewAdmissionControllerFromContext: the controller takes the
// certificates Secret's name and keys from webhook.GetOptions, as the
// process's server and certificates reconciler do, and watches its own
// configuration.
func TestNewAdmissionControllerFromContext(t *testing.T) {
	ctx, fakes := injectiontest.NewContext(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bindkit-system", Name: "custom-certs"},
			Data: map[string][]byte{"bundle.pem": []byte("CUSTOM CA")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bindkit-system", Name: webhook.DefaultSecretName},
			Data: map[string][]byte{"ca-cert.pem": []byte("WRONG CA")}},
		installedConfig("bindings.bindkit.dev"),
	)
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")
	opts := webhook.Options{SecretName: "custom-certs"}
	opts.Keys.CACert = "bundle.pem"
	ctx = webhook.WithOptions(ctx, opts)
	var gotHandler cache.ResourceEventHandler
	bindings := []psbinding.Bindable{newGithubBinding("team-a", "gh", "web")}
	impl := wiring.NewAdmissionController(ctx, "bindings.bindkit.dev", "/bindings",
		func(_ context.Context, h cache.ResourceEventHandler) psbinding.ListAll {
			gotHandler = h
			return func() ([]psbinding.Bindable, error) { return bindings, nil }
		}, nil)

	ac, ok := wiring.Admission(impl)
	if !ok {
		t.Fatalf("Reconciler %T is not an *AdmissionReconciler", impl.Reconciler())
	}
	if diff := cmp.Diff([]string{"bindings.bindkit.dev", "/bindings"}, []string{impl.Name(), ac.Path()}); diff != "" {
		t.Errorf("name and path (-want +got):\n%s", diff)
	}
	if gotHandler == nil {
		t.Error("GetListAll was not given a handler")
	}
	fakes.Start(t)
	if !fakes.Informers.NamespacedKubeInformerFactory("bindkit-system").Core().V1().Secrets().Informer().HasSynced() {
		t.Error("the system namespace's Secret informer was not started")
	}
	if !fakes.Informers.NamedKubeInformerFactory("bindings.bindkit.dev").Admissionregistration().V1().MutatingWebhookConfigurations().Informer().HasSynced() {
		t.Error("the configuration's informer was not started")
	}

	ac.Promote(func(string) {})
	if err := ac.Reconcile(t.Context(), ac.Key()); err != nil {
		t.Fatal(err)
	}
	// The informer brings our own update back; the published bundle is the
	// custom Secret's.
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		bundle, published, err := ac.PublishedCABundle()
		return published && string(bundle) == "CUSTOM CA", err
	})
	if err != nil {
		bundle, published, _ := ac.PublishedCABundle()
		t.Errorf("published CA bundle = %q (published %v), want the custom Secret's: %v", bundle, published, err)
	}
}

func TestNewAdmissionControllerWithoutClientsPanicsClearly(t *testing.T) {
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "injection: no") {
			t.Errorf("panic = %q, want a message naming what is missing", msg)
		}
	}()
	ctx := injection.WithSystemNamespace(context.Background(), "bindkit-system")
	wiring.NewAdmissionController(ctx, "cfg", "/p", func(context.Context, cache.ResourceEventHandler) psbinding.ListAll { return nil }, nil)
}
