package duck_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/testenv"
)

var (
	widgetsGVR = schema.GroupVersionResource{Group: "duck.bindkit.dev", Version: "v1alpha1", Resource: "widgets"}
	gadgetsGVR = schema.GroupVersionResource{Group: "duck.bindkit.dev", Version: "v1alpha1", Resource: "fleetmembers"}
	gadgetKind = schema.GroupKind{Group: "duck.bindkit.dev", Kind: "Gadget"}
)

type cluster struct {
	env     *testenv.Environment
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	mapper  *duck.RESTMapper
	ns      string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	env := controlPlane.Env(t)
	ctx := t.Context()
	if err := env.InstallCRDs(ctx, "testdata/workloads.yaml"); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
	c := &cluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dynamic: dynamic.NewForConfigOrDie(env.Config)}
	c.mapper = duck.NewRESTMapper(c.kube.Discovery())
	ns, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "duck-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { c.kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	c.ns = ns.Name
	return c
}

func (c *cluster) create(t *testing.T, gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(c.ns)
	u.SetResourceVersion("")
	u.SetUID("")
	delete(u.Object, "status")
	got, err := c.dynamic.Resource(gvr).Namespace(c.ns).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	return got
}

func widgetDoc(t testing.TB) map[string]any {
	d := realisticDeployment()
	return map[string]any{
		"apiVersion": "duck.bindkit.dev/v1alpha1", "kind": "Widget",
		"metadata": map[string]any{"name": "widget"},
		"spec": map[string]any{
			"replicas":  1.0,
			"x-unknown": "spec",
			"template": func() map[string]any {
				tmpl := toMap(t, d.Spec.Template)
				tmpl["x-unknown"] = "template"
				tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["x-unknown"] = "container 0"
				return tmpl
			}(),
		},
	}
}

func gadgetDoc(t testing.TB) map[string]any {
	doc := customDoc(t)
	doc["apiVersion"], doc["kind"] = "duck.bindkit.dev/v1alpha1", "Gadget"
	doc["metadata"] = map[string]any{"name": "gadget"}
	return doc
}

// TestInformerFactoriesWithRealAPIServer lists and watches Deployments, a
// CronJob and two custom resources through the cached, enqueueing, typed
// informer stack, each decoded into WithPod by its shape.
func TestInformerFactoriesWithRealAPIServer(t *testing.T) {
	c := newCluster(t)
	deployment := toMap(t, realisticDeployment())
	c.create(t, deploymentsGVR, deployment)
	c.create(t, cronJobsGVR, cronJobDoc(t))
	c.create(t, widgetsGVR, widgetDoc(t))
	c.create(t, gadgetsGVR, gadgetDoc(t))

	events := make(chan string, 100)
	factory := &duck.EnqueueInformerFactory{
		Delegate: &duck.CachedInformerFactory{
			Delegate: &duck.MetadataInformerFactory{Client: metadata.NewForConfigOrDie(c.env.Config), Mapper: c.mapper},
			Stop:     t.Context().Done(),
		},
		EventHandler: enqueueNames(events),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	tests := []struct {
		gvr  schema.GroupVersionResource
		kind string
		name string
	}{
		{deploymentsGVR, "Deployment", "web"},
		{cronJobsGVR, "CronJob", "nightly"},
		{widgetsGVR, "Widget", "widget"},
		{gadgetsGVR, "Gadget", "gadget"},
	}
	for _, tt := range tests {
		_, lister, err := factory.Get(ctx, tt.gvr)
		if err != nil {
			t.Fatalf("Get(%s): %v", tt.gvr, err)
		}
		obj, err := lister.ByNamespace(c.ns).Get(tt.name)
		if err != nil {
			t.Fatalf("%s lister: %v", tt.gvr.Resource, err)
		}
		m := obj.(*metav1.PartialObjectMetadata)
		if m.Kind != tt.kind || m.APIVersion != tt.gvr.GroupVersion().String() || m.ResourceVersion == "" || len(m.ManagedFields) != 0 {
			t.Errorf("%s %s: cached as %s %s at %q with %d managedFields, want %s, a resourceVersion and none",
				tt.gvr.Resource, tt.name, m.APIVersion, m.Kind, m.ResourceVersion, len(m.ManagedFields), tt.kind)
		}
	}

	// The watch delivers changes: a new Deployment, and a relabelled widget.
	second := realisticDeployment()
	second.Name = "api"
	c.create(t, deploymentsGVR, toMap(t, second))
	patch := []byte(`{"metadata":{"labels":{"stage":"canary"}}}`)
	if _, err := c.dynamic.Resource(widgetsGVR).Namespace(c.ns).Patch(ctx, "widget", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch widget: %v", err)
	}
	_, deployments, _ := factory.Get(ctx, deploymentsGVR)
	_, widgets, _ := factory.Get(ctx, widgetsGVR)
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := deployments.ByNamespace(c.ns).Get("api")
		w, werr := widgets.ByNamespace(c.ns).Get("widget")
		return err == nil && werr == nil && w.(*metav1.PartialObjectMetadata).Labels["stage"] == "canary", nil
	})
	if err != nil {
		t.Fatalf("informers never saw the new Deployment and the changed widget: %v", err)
	}

	seen := map[string]bool{}
	for len(events) > 0 {
		seen[<-events] = true
	}
	for _, name := range []string{"web", "api", "nightly", "widget", "gadget"} {
		if !seen[c.ns+"/"+name] {
			t.Errorf("event handler never saw %s/%s (saw %v)", c.ns, name, seen)
		}
	}
}

// TestPatchKeepsUnknownFieldsWithRealAPIServer sends patches built from
// WithPod changes to objects with fields WithPod does not know, under each
// shape, and reads back what the kube-apiserver stored.
func TestPatchKeepsUnknownFieldsWithRealAPIServer(t *testing.T) {
	c := newCluster(t)
	tests := []struct {
		name    string
		gvr     schema.GroupVersionResource
		shape   duck.Shape
		doc     map[string]any
		unknown [][]string // paths that must survive
		// defaulted: the kube-apiserver fills in defaults, so what it
		// stores is more than what was sent.
		defaulted bool
	}{
		{"widget", widgetsGVR, duck.PodSpecable(), widgetDoc(t), [][]string{
			{"spec", "x-unknown"}, {"spec", "template", "x-unknown"}, {"spec", "replicas"},
		}, false},
		{"gadget", gadgetsGVR, duck.TemplateAt("spec", "workload", "template"), gadgetDoc(t), [][]string{
			{"spec", "x-unknown"}, {"spec", "workload", "replicas"},
		}, false},
		{"cronjob", cronJobsGVR, duck.CronJob(), cronJobDoc(t), [][]string{{"spec", "schedule"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			created := c.create(t, tt.gvr, tt.doc)
			before, err := tt.shape.FromUnstructured(created)
			if err != nil {
				t.Fatal(err)
			}
			after := before.DeepCopy()
			addEnv(&after.Spec.Template.Spec.Containers[0], "BOUND", "yes")
			after.Spec.Template.Spec.Volumes = append(after.Spec.Template.Spec.Volumes, corev1.Volume{Name: "bound", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			after.Labels = map[string]string{"bindings.bindkit.dev/bound": "true"}
			ops, err := tt.shape.CreatePatch(before, after)
			if err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := c.dynamic.Resource(tt.gvr).Namespace(c.ns).Patch(ctx, created.GetName(), types.JSONPatchType, body, metav1.PatchOptions{})
			if err != nil {
				t.Fatalf("patch %s: %v\n%s", created.GetName(), err, body)
			}
			got, err := tt.shape.FromUnstructured(patched)
			if err != nil {
				t.Fatal(err)
			}
			gotSpec := &got.Spec.Template.Spec
			if env := gotSpec.Containers[0].Env; env[len(env)-1] != (corev1.EnvVar{Name: "BOUND", Value: "yes"}) {
				t.Errorf("stored env %v does not end with BOUND=yes", env)
			}
			if v := gotSpec.Volumes[len(gotSpec.Volumes)-1]; v.Name != "bound" || v.EmptyDir == nil {
				t.Errorf("stored volumes do not end with the bound emptyDir: %v", gotSpec.Volumes)
			}
			if !tt.defaulted {
				if diff := cmp.Diff(toMap(t, after.Spec.Template.Spec), toMap(t, gotSpec)); diff != "" {
					t.Errorf("stored template spec (-want +got):\n%s", diff)
				}
				// Nothing left to change: the stored object gives no patch.
				if again, _ := tt.shape.CreatePatch(got, after); len(again) != 0 {
					t.Errorf("patch against the stored object = %v, want none", formatOps(t, again))
				}
			}
			if got.Labels["bindings.bindkit.dev/bound"] != "true" {
				t.Errorf("stored labels %v lack the bound label", got.Labels)
			}
			for _, path := range tt.unknown {
				wantV, _, _ := unstructured.NestedFieldNoCopy(created.Object, path...)
				gotV, found, _ := unstructured.NestedFieldNoCopy(patched.Object, path...)
				if !found || !cmp.Equal(wantV, gotV) {
					t.Errorf("%v = %v (found %v), want %v kept", path, gotV, found, wantV)
				}
			}
			if tt.name == "widget" {
				c0, _, _ := unstructured.NestedSlice(patched.Object, "spec", "template", "spec", "containers")
				if v := c0[0].(map[string]any)["x-unknown"]; v != "container 0" {
					t.Errorf("containers[0].x-unknown = %v, want it kept", v)
				}
			}
		})
	}
}

// TestRESTMapperWithRealAPIServer resolves irregular plurals and a CRD's
// declared plural from the kube-apiserver's discovery.
func TestRESTMapperWithRealAPIServer(t *testing.T) {
	c := newCluster(t)
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(c.env.Config))
	tests := []struct {
		gvk  schema.GroupVersionKind
		want schema.GroupVersionResource
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}, schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"}, schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, deploymentsGVR},
		{schema.GroupVersionKind{Group: "duck.bindkit.dev", Version: "v1alpha1", Kind: "Widget"}, widgetsGVR},
		{schema.GroupVersionKind{Group: "duck.bindkit.dev", Version: "v1alpha1", Kind: "Gadget"}, gadgetsGVR},
	}
	for _, tt := range tests {
		got, err := duck.ResourceFor(mapper, tt.gvk)
		if err != nil {
			t.Errorf("ResourceFor(%v): %v", tt.gvk, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ResourceFor(%v) = %v, want %v", tt.gvk, got, tt.want)
		}
	}
	if _, err := duck.ResourceFor(mapper, schema.GroupVersionKind{Group: "duck.bindkit.dev", Version: "v1alpha1", Kind: "Nonesuch"}); err == nil {
		t.Error("ResourceFor(Nonesuch) found a resource")
	}
}

func enqueueNames(out chan<- string) handlerFuncs {
	return handlerFuncs{out: out}
}

// handlerFuncs records namespace/name of every added or updated object.
type handlerFuncs struct{ out chan<- string }

func (h handlerFuncs) OnAdd(obj any, _ bool) { h.send(obj) }
func (h handlerFuncs) OnUpdate(_, obj any)   { h.send(obj) }
func (h handlerFuncs) OnDelete(any)          {}
func (h handlerFuncs) send(obj any) {
	m := obj.(*metav1.PartialObjectMetadata)
	select {
	case h.out <- m.Namespace + "/" + m.Name:
	default:
	}
}
