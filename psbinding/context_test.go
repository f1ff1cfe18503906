package psbinding

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/webhook"
)

func TestNewAdmissionControllerFromContext(t *testing.T) {
	ctx, fakes := injectiontest.NewContext(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bindkit-system", Name: webhook.DefaultSecretName}},
	)
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")
	var gotHandler cache.ResourceEventHandler
	impl := NewAdmissionController(ctx, "bindings.bindkit.dev", "/bindings",
		func(_ context.Context, h cache.ResourceEventHandler) ListAll {
			gotHandler = h
			return func() ([]Bindable, error) { return nil, nil }
		}, nil, WithSecretName(webhook.DefaultSecretName))

	ac, ok := impl.Reconciler().(webhook.AdmissionController)
	if !ok {
		t.Fatalf("Reconciler %T is not a webhook.AdmissionController", impl.Reconciler())
	}
	if diff := cmp.Diff([]string{"bindings.bindkit.dev", "/bindings"}, []string{impl.Name(), ac.Path()}); diff != "" {
		t.Errorf("name and path (-want +got):\n%s", diff)
	}
	if gotHandler == nil {
		t.Error("GetListAll was not given a handler")
	}
	fakes.Start(t)
	if started := fakes.Informers.NamespacedKubeInformerFactory("bindkit-system").Core().V1().Secrets().Informer().HasSynced(); !started {
		t.Error("the system namespace's Secret informer was not started")
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
	NewAdmissionController(ctx, "cfg", "/p", func(context.Context, cache.ResourceEventHandler) ListAll { return nil }, nil)
}
