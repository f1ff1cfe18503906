package psbinding

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

var (
	envBindingsGVR = schema.GroupVersionResource{Group: "test.bindkit.dev", Version: "v1", Resource: "envbindings"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}

func testDeployment(ns, name string, labels map[string]string, env ...corev1.EnvVar) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app", Env: env}},
		}}},
	}
}

// reconcilerFixture is a BaseReconciler over a fake dynamic client.
type reconcilerFixture struct {
	r        *BaseReconciler
	client   *dynamicfake.FakeDynamicClient
	recorder *record.FakeRecorder
}

func newReconcilerFixture(t *testing.T, objects ...runtime.Object) *reconcilerFixture {
	t.Helper()
	var unstructuredObjects []runtime.Object
	for _, o := range objects {
		unstructuredObjects = append(unstructuredObjects, toUnstructured(t, o))
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		envBindingsGVR: "EnvBindingList", deploymentsGVR: "DeploymentList", podsGVR: "PodList",
	}, unstructuredObjects...)
	mapper := testMapper().(*meta.DefaultRESTMapper)
	mapper.Add(schema.GroupVersionKind{Group: "test.bindkit.dev", Version: "v1", Kind: "EnvBinding"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	recorder := record.NewFakeRecorder(100)
	r := &BaseReconciler{
		GVR: envBindingsGVR,
		Get: func(ns, name string) (Bindable, error) {
			u, err := client.Resource(envBindingsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			b := &envBinding{}
			return b, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b)
		},
		DynamicClient: client,
		Factory:       &duck.CachedInformerFactory{Delegate: &duck.TypedInformerFactory{Client: client}, Stop: stop},
		Mapper:        mapper,
		Tracker:       tracker.New(func(tracker.Observer) {}, time.Hour),
		Recorder:      recorder,
	}
	r.Promote(func(string) {})
	return &reconcilerFixture{r: r, client: client, recorder: recorder}
}

func (f *reconcilerFixture) binding(t *testing.T, ns, name string) *envBinding {
	t.Helper()
	b, err := f.r.Get(ns, name)
	if err != nil {
		t.Fatalf("get binding: %v", err)
	}
	return b.(*envBinding)
}

func (f *reconcilerFixture) deploymentEnv(t *testing.T, ns, name string) []corev1.EnvVar {
	t.Helper()
	u, err := f.client.Resource(deploymentsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment: %v", err)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Env
}

// waitCached waits until the subject informer's copy of a deployment
// satisfies cond.
func (f *reconcilerFixture) waitCached(t *testing.T, ns, name string, cond func(*duck.WithPod) bool) {
	t.Helper()
	_, lister, err := f.r.Factory.Get(context.Background(), deploymentsGVR)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		obj, err := lister.ByNamespace(ns).Get(name)
		return err == nil && cond(obj.(*duck.WithPod)), nil
	})
	if err != nil {
		t.Fatalf("informer never saw the change to %s/%s: %v", ns, name, err)
	}
}

func (f *reconcilerFixture) writes(resource string) []string {
	var verbs []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == resource && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
		}
	}
	return verbs
}

// readyCondition is the part of Ready a test compares.
type readyCondition struct{ Status, Reason string }

func ready(b *envBinding) readyCondition {
	c := b.Status.GetCondition(duck.ConditionReady)
	if c == nil {
		return readyCondition{}
	}
	return readyCondition{string(c.Status), c.Reason}
}

func TestBaseReconcilerBindsByName(t *testing.T) {
	b := newEnvBinding("ns", "gh", deploymentRef("", "web", nil), "TOKEN", "t")
	b.Generation = 3
	f := newReconcilerFixture(t, b, testDeployment("ns", "web", nil))
	ctx := context.Background()

	if err := f.r.Reconcile(ctx, "ns/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	got := f.binding(t, "ns", "gh")
	if diff := cmp.Diff([]string{"test.bindkit.dev/envbindings"}, got.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(readyCondition{"True", duck.ReasonBindingAvailable}, ready(got)); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
	if got.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", got.Status.ObservedGeneration)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "TOKEN", Value: "t"}}, f.deploymentEnv(t, "ns", "web")); diff != "" {
		t.Errorf("deployment env (-want +got):\n%s", diff)
	}

	// A second reconcile, once the informer has seen the patch, finds
	// everything in place and writes nothing.
	f.waitCached(t, "ns", "web", func(wp *duck.WithPod) bool { return len(wp.Spec.Template.Spec.Containers[0].Env) == 1 })
	f.client.ClearActions()
	if err := f.r.Reconcile(ctx, "ns/gh"); err != nil {
		t.Fatalf("second Reconcile: %v", err)
	}
	if w := append(f.writes("deployments"), f.writes("envbindings")...); len(w) > 0 {
		t.Errorf("second reconcile wrote %v", w)
	}
}

func TestBaseReconcilerSelectorUnbindsSubjectsThatLeft(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	f := newReconcilerFixture(t,
		newEnvBinding("ns", "gh", deploymentRef("ns", "", sel), "TOKEN", "t"),
		testDeployment("ns", "web-1", map[string]string{"app": "web"}),
		testDeployment("ns", "web-2", map[string]string{"app": "web"}, bound),
		testDeployment("ns", "relabelled", map[string]string{"app": "other"}, bound),
		testDeployment("ns", "untouched", map[string]string{"app": "other"}, corev1.EnvVar{Name: "KEEP", Value: "k"}),
	)
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	want := map[string][]corev1.EnvVar{
		"web-1": {bound}, "web-2": {bound}, "relabelled": nil, "untouched": {{Name: "KEEP", Value: "k"}},
	}
	for name, env := range want {
		if diff := cmp.Diff(env, f.deploymentEnv(t, "ns", name), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s env (-want +got):\n%s", name, diff)
		}
	}
	// Only the two that changed were patched.
	if diff := cmp.Diff([]string{"patch/", "patch/"}, f.writes("deployments")); diff != "" {
		t.Errorf("deployment writes (-want +got):\n%s", diff)
	}
}

func TestBaseReconcilerConditions(t *testing.T) {
	tests := []struct {
		name      string
		subject   tracker.Reference
		objects   []runtime.Object
		wantReady readyCondition
		wantErr   func(error) bool
	}{{
		name:      "invalid subject is permanent",
		subject:   tracker.Reference{APIVersion: "apps/v1", Namespace: "ns", Name: "web"},
		wantReady: readyCondition{"False", ReasonSubjectInvalid},
		wantErr:   controller.IsPermanentError,
	}, {
		name:      "unknown kind is retried later",
		subject:   tracker.Reference{APIVersion: "example.com/v1", Kind: "Nothing", Namespace: "ns", Name: "x"},
		wantReady: readyCondition{"False", ReasonSubjectKindNotFound},
		wantErr:   func(err error) bool { _, ok := controller.IsRequeueAfter(err); return ok },
	}, {
		name:      "bare pods are bound at admission only",
		subject:   tracker.Reference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "p"},
		wantReady: readyCondition{"False", ReasonBoundAtAdmissionOnly},
		wantErr:   func(err error) bool { return err == nil },
	}, {
		name:      "a subject in another namespace is refused, by name",
		subject:   deploymentRef("other", "web", nil),
		objects:   []runtime.Object{testDeployment("other", "web", nil)},
		wantReady: readyCondition{"False", ReasonSubjectOutsideNamespace},
		wantErr:   controller.IsPermanentError,
	}, {
		name:      "a subject in another namespace is refused, by selector",
		subject:   deploymentRef("other", "", matchLabels("app", "web")),
		objects:   []runtime.Object{testDeployment("other", "web", map[string]string{"app": "web"})},
		wantReady: readyCondition{"False", ReasonSubjectOutsideNamespace},
		wantErr:   controller.IsPermanentError,
	}, {
		name:      "named subject not created yet is fine",
		subject:   deploymentRef("ns", "later", nil),
		wantReady: readyCondition{"True", duck.ReasonBindingAvailable},
		wantErr:   func(err error) bool { return err == nil },
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newEnvBinding("ns", "gh", tc.subject, "TOKEN", "t")
			f := newReconcilerFixture(t, append(tc.objects, b)...)
			err := f.r.Reconcile(context.Background(), "ns/gh")
			if !tc.wantErr(err) {
				t.Errorf("Reconcile error = %v", err)
			}
			if diff := cmp.Diff(tc.wantReady, ready(f.binding(t, "ns", "gh"))); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if got := f.writes("deployments"); len(got) > 0 {
				t.Errorf("subjects written: %v", got)
			}
		})
	}
}

func TestBaseReconcilerDeletionUndoesAndReleases(t *testing.T) {
	now := metav1.Now()
	for _, subject := range []tracker.Reference{
		deploymentRef("ns", "web", nil),
		{APIVersion: "example.com/v1", Kind: "Nothing", Namespace: "ns", Name: "x"},
	} {
		t.Run(subject.Kind, func(t *testing.T) {
			b := newEnvBinding("ns", "gh", subject, "TOKEN", "t")
			b.Finalizers = []string{"test.bindkit.dev/envbindings", "someone.else/keep"}
			b.DeletionTimestamp = &now
			f := newReconcilerFixture(t, b, testDeployment("ns", "web", nil, corev1.EnvVar{Name: "TOKEN", Value: "t"}, corev1.EnvVar{Name: "KEEP", Value: "k"}))
			if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if diff := cmp.Diff([]string{"someone.else/keep"}, f.binding(t, "ns", "gh").Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			wantEnv := []corev1.EnvVar{{Name: "KEEP", Value: "k"}}
			if subject.Kind == "Deployment" {
				if diff := cmp.Diff(wantEnv, f.deploymentEnv(t, "ns", "web")); diff != "" {
					t.Errorf("deployment env after deletion (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestBaseReconcilerFollowerAndMissingBinding(t *testing.T) {
	f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t"), testDeployment("ns", "web", nil))
	if err := f.r.Reconcile(context.Background(), "ns/missing"); err != nil {
		t.Errorf("Reconcile of a deleted binding: %v", err)
	}
	if err := f.r.Reconcile(context.Background(), "a/b/c"); !controller.IsPermanentError(err) {
		t.Errorf("bad key: err = %v, want permanent", err)
	}
	f.r.Demote()
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
		t.Errorf("follower Reconcile: %v", err)
	}
	if w := append(f.writes("deployments"), f.writes("envbindings")...); len(w) > 0 {
		t.Errorf("follower wrote %v", w)
	}
}

func TestBaseReconcilerInclusionModeLabelsNamespace(t *testing.T) {
	tests := []struct {
		name       string
		labels     map[string]string
		wantPatch  bool
		wantLabels map[string]string
	}{
		{name: "unlabelled namespace is opted in", wantPatch: true, wantLabels: map[string]string{IncludeLabel: "true"}},
		{name: "already included: no write", labels: map[string]string{IncludeLabel: "true"}, wantLabels: map[string]string{IncludeLabel: "true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t"), testDeployment("ns", "web", nil))
			namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: tc.labels}}
			kube := kubefake.NewClientset(namespace)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if err := indexer.Add(namespace); err != nil {
				t.Fatal(err)
			}
			f.r.SelectorMode = InclusionMode
			f.r.KubeClient = kube
			f.r.NamespaceLister = corelisters.NewNamespaceLister(indexer)

			if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			got, err := kube.CoreV1().Namespaces().Get(context.Background(), "ns", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLabels, got.Labels); diff != "" {
				t.Errorf("namespace labels (-want +got):\n%s", diff)
			}
			patched := slices.ContainsFunc(kube.Actions(), func(a k8stesting.Action) bool { return a.GetVerb() == "patch" })
			if patched != tc.wantPatch {
				t.Errorf("namespace patched = %v, want %v", patched, tc.wantPatch)
			}
		})
	}
}

func TestBaseReconcilerInclusionModeNeedsClients(t *testing.T) {
	f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t"))
	f.r.SelectorMode = InclusionMode
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err == nil {
		t.Fatal("Reconcile in inclusion mode without clients succeeded")
	}
	if diff := cmp.Diff(readyCondition{"False", ReasonNamespaceLabelFailed}, ready(f.binding(t, "ns", "gh"))); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
}

// TestBaseReconcilerNeverChangesWhatGetReturns: Get may hand out the
// informer's cached object; finalizer and status writes go to a copy.
func TestBaseReconcilerNeverChangesWhatGetReturns(t *testing.T) {
	f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t"), testDeployment("ns", "web", nil))
	cached, err := f.r.Get("ns", "gh")
	if err != nil {
		t.Fatal(err)
	}
	f.r.Get = func(string, string) (Bindable, error) { return cached, nil }
	before := cached.DeepCopyObject()
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if diff := cmp.Diff(before, cached); diff != "" {
		t.Errorf("Reconcile changed the object Get returned (-before +after):\n%s", diff)
	}
}
