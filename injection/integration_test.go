package injection_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
)

// TestNewWithRealAPIServer builds a context with New from a real
// kube-apiserver's config, lets a "constructor" request a Secrets informer
// and a typed informer for a CRD without generated clients, starts them
// and sees objects arrive, both those present before Start and those
// created after.
func TestNewWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	installCtx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := env.InstallCRDs(installCtx, "testdata/widgets.yaml"); err != nil {
		t.Fatal(err)
	}

	ctx, set, err := injection.New(t.Context(), env.Config, injection.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Shutdown)

	// Resource names come from discovery.
	gvr, err := duck.ResourceFor(injection.RESTMapper(ctx), widgetKind)
	if err != nil {
		t.Fatal(err)
	}
	if gvr != widgetsGVR {
		t.Fatalf("RESTMapper: Widget served as %s, want %s", gvr, widgetsGVR)
	}

	kube := injection.KubeClient(ctx)
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "injection-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	widgets := injection.DynamicClient(ctx).Resource(widgetsGVR).Namespace(ns.Name)
	if _, err := widgets.Create(ctx, widget(ns.Name, "before", int64(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns.Name).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// What a controller constructor does: request informers, start nothing.
	secrets := injection.KubeInformerFactory(ctx).Core().V1().Secrets().Lister()
	widgetInformer := injection.TypedInformerFor[Widget](ctx, widgetsGVR)

	set.Start(ctx)
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if err := set.WaitForCacheSync(syncCtx); err != nil {
		t.Fatal(err)
	}

	if _, err := secrets.Secrets(ns.Name).Get("token"); err != nil {
		t.Errorf("Secret created before Start not in the lister: %v", err)
	}
	if _, err := widgets.Create(ctx, widget(ns.Name, "after", int64(2)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{ns.Name + "/before": 1, ns.Name + "/after": 2}
	eventually(t, "widgets in the typed lister", func() string {
		got, err := widgetInformer.Lister().ListNamespace(ns.Name, labels.Everything())
		if err != nil {
			return err.Error()
		}
		return cmp.Diff(want, sizes(got))
	})
}
