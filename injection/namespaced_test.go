package injection_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
)

// A namespaced factory starts and syncs with the set and sees only its
// namespace, so a process can read its own Secret without listing all.
func TestNamespacedKubeInformerFactory(t *testing.T) {
	ctx, fakes := injectiontest.NewContext(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "certs"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "not-mine"}},
	)
	lister := injection.NamespacedKubeInformerFactory(ctx, "system").Core().V1().Secrets().Lister()
	if injection.NamespacedKubeInformerFactory(ctx, "system") != fakes.Informers.NamespacedKubeInformerFactory("system") {
		t.Error("two requests for one namespace gave two factories")
	}
	fakes.Informers.Start(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := fakes.Informers.WaitForCacheSync(waitCtx); err != nil {
		t.Fatal(err)
	}
	secrets, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range secrets {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	if diff := cmp.Diff([]string{"system/certs"}, names); diff != "" {
		t.Errorf("secrets seen (-want +got):\n%s", diff)
	}
}
