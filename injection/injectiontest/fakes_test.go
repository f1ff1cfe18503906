package injectiontest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
)

var gadgetResource = injectiontest.Resource{
	Kind:       schema.GroupVersionKind{Group: "example.bindkit.dev", Version: "v1alpha1", Kind: "Gadget"},
	Resource:   "gadgetries", // an irregular plural: never guessed
	Namespaced: true,
}

func gadget(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gadgetResource.Kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestNewContextSeedsBothClients(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "token"}}
	// A built-in kind given as unstructured reaches the typed client too.
	deployment := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "shop", "name": "web"},
	}}
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{
		Resources: []injectiontest.Resource{gadgetResource},
	}, secret, deployment, gadget("shop", "g1"))

	tests := []struct {
		name      string
		get       func(context.Context) error
		wantFound bool
	}{{
		name: "typed Secret via kube client",
		get: func(ctx context.Context) error {
			_, err := fakes.Kube.CoreV1().Secrets("shop").Get(ctx, "token", metav1.GetOptions{})
			return err
		},
		wantFound: true,
	}, {
		name: "typed Secret via dynamic client",
		get: func(ctx context.Context) error {
			_, err := fakes.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace("shop").Get(ctx, "token", metav1.GetOptions{})
			return err
		},
		wantFound: true,
	}, {
		name: "unstructured Deployment via kube client",
		get: func(ctx context.Context) error {
			_, err := fakes.Kube.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
			return err
		},
		wantFound: true,
	}, {
		name: "custom resource via dynamic client, under its declared plural",
		get: func(ctx context.Context) error {
			_, err := fakes.Dynamic.Resource(gadgetResource.GVR()).Namespace("shop").Get(ctx, "g1", metav1.GetOptions{})
			return err
		},
		wantFound: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.get(ctx); (err == nil) != tt.wantFound {
				t.Errorf("get: err = %v, want found %v", err, tt.wantFound)
			}
		})
	}

	if injection.KubeClient(ctx) != fakes.Kube || injection.DynamicClient(ctx) != fakes.Dynamic || injection.RESTMapper(ctx) != fakes.RESTMapper {
		t.Errorf("context does not carry the fakes")
	}
	if _, ok := injection.TryConfig(ctx); ok {
		t.Errorf("fake context carries a rest config")
	}
}

func TestFakeRESTMapper(t *testing.T) {
	ctx, _ := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{gadgetResource}})
	mapper := injection.RESTMapper(ctx)
	tests := []struct {
		kind          schema.GroupVersionKind
		wantResource  string
		wantNamespace bool
	}{
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), "deployments", true},
		{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), "statefulsets", true},
		{appsv1.SchemeGroupVersion.WithKind("DaemonSet"), "daemonsets", true},
		{appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "replicasets", true},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "jobs", true},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, "cronjobs", true},
		{corev1.SchemeGroupVersion.WithKind("Pod"), "pods", true},
		{corev1.SchemeGroupVersion.WithKind("Namespace"), "namespaces", false},
		{gadgetResource.Kind, "gadgetries", true},
	}
	for _, tt := range tests {
		m, err := mapper.RESTMapping(tt.kind.GroupKind(), tt.kind.Version)
		if err != nil {
			t.Errorf("RESTMapping(%s): %v", tt.kind, err)
			continue
		}
		got := []any{m.Resource.Resource, m.Scope.Name() == "namespace"}
		if diff := cmp.Diff([]any{tt.wantResource, tt.wantNamespace}, got); diff != "" {
			t.Errorf("RESTMapping(%s) resource, namespaced (-want +got):\n%s", tt.kind, diff)
		}
	}
	if _, err := duck.ResourceFor(mapper, schema.GroupVersionKind{Group: "example.bindkit.dev", Version: "v1alpha1", Kind: "Unknown"}); err == nil {
		t.Errorf("an undeclared kind mapped to a resource")
	}
}

// The fakes serve informers: typed kube, typed custom and duck ones.
func TestFakesServeInformers(t *testing.T) {
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	ctx, fakes := injectiontest.NewContext(t, deployment)
	deployments := injection.KubeInformerFactory(ctx).Apps().V1().Deployments().Lister()
	fakes.Start(t)

	got, err := deployments.Deployments("shop").Get("web")
	if err != nil {
		t.Fatalf("kube lister: %v", err)
	}
	if got.Name != "web" {
		t.Errorf("kube lister returned %s", got.Name)
	}
	_, lister, err := injection.DuckInformerFactory(ctx).Get(t.Context(), appsv1.SchemeGroupVersion.WithResource("deployments"))
	if err != nil {
		t.Fatalf("duck factory: %v", err)
	}
	objs, err := lister.List(labels.Everything())
	if err != nil || len(objs) != 1 {
		t.Errorf("duck lister = %d objects, %v; want 1", len(objs), err)
	}
}

// fatalTB records Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNewContextFailsOnUnknownKinds(t *testing.T) {
	tests := []struct {
		name    string
		obj     k8sruntime.Object
		wantMsg string
	}{{
		name:    "undeclared custom resource",
		obj:     gadget("shop", "g1"),
		wantMsg: "injectiontest: seed example.bindkit.dev/v1alpha1 Gadget: declare it in Options.Resources",
	}, {
		name:    "custom type without TypeMeta",
		obj:     &untyped{},
		wantMsg: "injectiontest: seed *injectiontest_test.untyped: no apiVersion and kind, and not a client-go type: set its TypeMeta",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := &fatalTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				injectiontest.NewContext(tb, tt.obj)
			}()
			<-done
			if !strings.HasPrefix(tb.msg, tt.wantMsg) {
				t.Errorf("Fatalf message = %q, want prefix %q", tb.msg, tt.wantMsg)
			}
		})
	}
}

type untyped struct{ metav1.ObjectMeta }

func (u *untyped) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (u *untyped) DeepCopyObject() k8sruntime.Object {
	out := *u
	return &out
}

// TestResourceVersions: seeded objects get a resourceVersion, and each
// write stores a new one, as an API server does, so a JSON patch that tests
// the resourceVersion it read applies once and fails after a change.
func TestResourceVersions(t *testing.T) {
	ctx, fakes := injectiontest.NewContext(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}})
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	seeded, err := fakes.Dynamic.Resource(gvr).Namespace("ns").Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := seeded.GetResourceVersion()
	if rv == "" {
		t.Fatal("a seeded object has no resourceVersion")
	}
	typed, err := fakes.Kube.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if typed.ResourceVersion != rv {
		t.Errorf("the kube fake's copy has resourceVersion %q, the dynamic fake's %q", typed.ResourceVersion, rv)
	}

	patch := []byte(`[{"op":"test","path":"/metadata/resourceVersion","value":"` + rv + `"},{"op":"add","path":"/data","value":{"k":"v"}}]`)
	patched, err := fakes.Dynamic.Resource(gvr).Namespace("ns").Patch(ctx, "cm", types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch guarded by the current resourceVersion: %v", err)
	}
	if patched.GetResourceVersion() == rv {
		t.Errorf("a patch kept resourceVersion %q", rv)
	}
	if _, err := fakes.Dynamic.Resource(gvr).Namespace("ns").Patch(ctx, "cm", types.JSONPatchType, patch, metav1.PatchOptions{}); err == nil {
		t.Error("a patch guarded by a stale resourceVersion applied")
	}

	created, err := fakes.Kube.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := fakes.Kube.CoreV1().ConfigMaps("ns").Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.ResourceVersion == "" || updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("create then update gave resourceVersions %q and %q, want two distinct ones", created.ResourceVersion, updated.ResourceVersion)
	}
}
