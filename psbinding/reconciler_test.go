package psbinding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/metadata"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/tracker"
)

var (
	envBindingsGVR  = schema.GroupVersionResource{Group: "test.bindkit.dev", Version: "v1", Resource: "envbindings"}
	deploymentsGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	podsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	statefulSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

func toUnstructured(t testing.TB, obj runtime.Object) *unstructured.Unstructured {
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

func newReconcilerFixture(t testing.TB, objects ...runtime.Object) *reconcilerFixture {
	t.Helper()
	var unstructuredObjects []runtime.Object
	for _, o := range objects {
		unstructuredObjects = append(unstructuredObjects, toUnstructured(t, o))
	}
	for _, ns := range []string{"ns", "other"} {
		if !slices.ContainsFunc(objects, func(o runtime.Object) bool { n, ok := o.(*corev1.Namespace); return ok && n.Name == ns }) {
			unstructuredObjects = append(unstructuredObjects, toUnstructured(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		envBindingsGVR: "EnvBindingList", deploymentsGVR: "DeploymentList", podsGVR: "PodList",
		statefulSetsGVR: "StatefulSetList", namespacesGVR: "NamespaceList",
	}, unstructuredObjects...)
	mapper := testMapper().(*meta.DefaultRESTMapper)
	mapper.Add(schema.GroupVersionKind{Group: "test.bindkit.dev", Version: "v1", Kind: "EnvBinding"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
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
		Factory:       &duck.CachedInformerFactory{Delegate: &duck.MetadataInformerFactory{Client: injectiontest.MetadataFromDynamic(client), Mapper: mapper}, Stop: stop},
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
	if m, ok := b.(*misbehaving); ok {
		return &m.envBinding
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

// deploymentBound is what a deployment's duck.BoundAnnotation records.
func (f *reconcilerFixture) deploymentBound(t *testing.T, ns, name string) string {
	t.Helper()
	u, err := f.client.Resource(deploymentsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment: %v", err)
	}
	return u.GetAnnotations()[duck.BoundAnnotation]
}

// waitCached waits until the subject cache's copy of a deployment
// satisfies cond.
func (f *reconcilerFixture) waitCached(t *testing.T, ns, name string, cond func(*metav1.PartialObjectMetadata) bool) {
	t.Helper()
	waitCachedDeployment(t, f.r.Factory, ns, name, 10*time.Second, cond)
}

// waitCachedDeployment waits, up to timeout, until the copy of Deployment
// ns/name in a reconciler's subject cache (factory, of metadata) satisfies
// cond.
func waitCachedDeployment(t *testing.T, factory duck.InformerFactory, ns, name string, timeout time.Duration, cond func(*metav1.PartialObjectMetadata) bool) {
	t.Helper()
	_, lister, err := factory.Get(context.Background(), deploymentsGVR)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		obj, err := lister.ByNamespace(ns).Get(name)
		return err == nil && cond(obj.(*metav1.PartialObjectMetadata)), nil
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

// recorded returns d with a duck.BoundAnnotation naming the envbinding
// bindings at generation 0.
func recorded(d *appsv1.Deployment, bindings ...string) *appsv1.Deployment {
	b := duck.Bound{}
	for _, name := range bindings {
		b[duck.BoundBy{Resource: envBindingsGVR.GroupResource(), Name: name}] = 0
	}
	d.Annotations = duck.SetBound(d.Annotations, b)
	return d
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
	if diff := cmp.Diff("apps/v1/Deployment", got.Annotations[SubjectKindsAnnotation]); diff != "" {
		t.Errorf("recorded kinds (-want +got):\n%s", diff)
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
	if diff := cmp.Diff("envbindings.test.bindkit.dev/gh:3", f.deploymentBound(t, "ns", "web")); diff != "" {
		t.Errorf("deployment's record (-want +got):\n%s", diff)
	}

	// A second reconcile, once the cache has seen the patch, reads and
	// writes nothing.
	f.waitCached(t, "ns", "web", func(m *metav1.PartialObjectMetadata) bool { return m.Annotations[duck.BoundAnnotation] != "" })
	f.client.ClearActions()
	if err := f.r.Reconcile(ctx, "ns/gh"); err != nil {
		t.Fatalf("second Reconcile: %v", err)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == envBindingsGVR {
			continue // the fixture's Get, which a lister serves in a process
		}
		t.Errorf("second reconcile sent %s %s", a.GetVerb(), a.GetResource().Resource)
	}
}

func TestBaseReconcilerUndoesOnlyWhatItBound(t *testing.T) {
	bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	f := newReconcilerFixture(t,
		newEnvBinding("ns", "gh", deploymentRef("ns", "", matchLabels("app", "web")), "TOKEN", "t"),
		testDeployment("ns", "web-1", map[string]string{"app": "web"}),
		recorded(testDeployment("ns", "web-2", map[string]string{"app": "web"}, bound), "gh"),
		recorded(testDeployment("ns", "relabelled", map[string]string{"app": "other"}, bound), "gh"),
		// Bound by another Binding of the kind that writes the same field.
		recorded(testDeployment("ns", "someone-elses", map[string]string{"app": "other"}, bound), "other-binding"),
		testDeployment("ns", "untouched", map[string]string{"app": "other"}, corev1.EnvVar{Name: "KEEP", Value: "k"}),
		// Opted out: never patched, whatever it records.
		recorded(testDeployment("ns", "excluded-bound", map[string]string{"app": "other", ExcludeLabel: "true"}, bound), "gh"),
		testDeployment("ns", "excluded", map[string]string{"app": "web", ExcludeLabel: "true"}),
	)
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var gets []string
	for _, a := range f.client.Actions() {
		if g, ok := a.(k8stesting.GetAction); ok && a.GetVerb() == "get" && a.GetResource() == deploymentsGVR {
			gets = append(gets, g.GetName())
		}
	}
	slices.Sort(gets)
	if diff := cmp.Diff([]string{"relabelled", "web-1"}, gets); diff != "" {
		t.Errorf("full reads (-want +got):\n%s", diff)
	}
	want := map[string][]corev1.EnvVar{
		"web-1": {bound}, "web-2": {bound}, "relabelled": nil, "someone-elses": {bound},
		"untouched": {{Name: "KEEP", Value: "k"}}, "excluded-bound": {bound}, "excluded": nil,
	}
	for name, env := range want {
		if diff := cmp.Diff(env, f.deploymentEnv(t, "ns", name), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s env (-want +got):\n%s", name, diff)
		}
	}
	// web-1 bound, relabelled unbound; nothing else written, nothing else
	// even read.
	if diff := cmp.Diff([]string{"patch/", "patch/"}, f.writes("deployments")); diff != "" {
		t.Errorf("deployment writes (-want +got):\n%s", diff)
	}
	if got := f.deploymentBound(t, "ns", "relabelled"); got != "" {
		t.Errorf("relabelled still records %q", got)
	}
}

func TestBaseReconcilerUnbindsAKindItNoLongerNames(t *testing.T) {
	bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	b := newEnvBinding("ns", "gh", tracker.Reference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "ns", Name: "db"}, "TOKEN", "t")
	b.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"}
	b.Finalizers = []string{"test.bindkit.dev/envbindings"}
	f := newReconcilerFixture(t, b, recorded(testDeployment("ns", "web", nil, bound), "gh"))
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if diff := cmp.Diff([]corev1.EnvVar(nil), f.deploymentEnv(t, "ns", "web"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("deployment env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("apps/v1/StatefulSet", f.binding(t, "ns", "gh").Annotations[SubjectKindsAnnotation]); diff != "" {
		t.Errorf("recorded kinds (-want +got):\n%s", diff)
	}
}

func TestBaseReconcilerConditions(t *testing.T) {
	tests := []struct {
		name      string
		subject   tracker.Reference
		objects   []runtime.Object
		mode      SelectorMode
		excluded  []string
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
		name:      "an excluded namespace binds nothing",
		subject:   deploymentRef("ns", "web", nil),
		objects:   []runtime.Object{namespace("ns", ExcludeLabel, "true"), testDeployment("ns", "web", nil)},
		wantReady: readyCondition{"False", ReasonNamespaceExcluded},
		wantErr:   func(err error) bool { return err == nil },
	}, {
		name:      "a namespace the webhook is never called in binds nothing",
		subject:   deploymentRef("ns", "web", nil),
		objects:   []runtime.Object{testDeployment("ns", "web", nil)},
		excluded:  []string{"bindkit-system", "ns"},
		wantReady: readyCondition{"False", ReasonNamespaceExcluded},
		wantErr:   func(err error) bool { return err == nil },
	}, {
		name:      "in inclusion mode a namespace that did not opt in binds nothing",
		subject:   deploymentRef("ns", "web", nil),
		objects:   []runtime.Object{testDeployment("ns", "web", nil)},
		mode:      InclusionMode,
		wantReady: readyCondition{"False", ReasonNamespaceNotIncluded},
		wantErr:   func(err error) bool { return err == nil },
	}, {
		name:      "in inclusion mode a namespace that opted in binds",
		subject:   deploymentRef("ns", "later", nil),
		objects:   []runtime.Object{namespace("ns", IncludeLabel, "true")},
		mode:      InclusionMode,
		wantReady: readyCondition{"True", duck.ReasonBindingAvailable},
		wantErr:   func(err error) bool { return err == nil },
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
			f.r.SelectorMode = tc.mode
			f.r.ExcludedNamespaces = tc.excluded
			err := f.r.Reconcile(context.Background(), "ns/gh")
			if !tc.wantErr(err) {
				t.Errorf("Reconcile error = %v", err)
			}
			if diff := cmp.Diff(tc.wantReady, ready(f.binding(t, "ns", "gh"))); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if got := append(f.writes("deployments"), f.writes("namespaces")...); len(got) > 0 {
				t.Errorf("subjects or namespaces written: %v", got)
			}
		})
	}
}

func namespace(name string, labels ...string) *corev1.Namespace {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		ns.Labels[labels[i]] = labels[i+1]
	}
	return ns
}

func TestBaseReconcilerWithContextOncePerReconcile(t *testing.T) {
	sel := matchLabels("app", "web")
	var objects []runtime.Object
	for _, name := range []string{"a", "b", "c"} {
		objects = append(objects, testDeployment("ns", name, map[string]string{"app": "web"}))
	}
	for _, tc := range []struct {
		name     string
		objects  []runtime.Object
		fail     bool
		want     readyCondition
		wantEnvs int
	}{
		{name: "three subjects, one call", objects: objects, want: readyCondition{"True", duck.ReasonBindingAvailable}, wantEnvs: 3},
		{name: "failing, no subject: not Ready", fail: true, want: readyCondition{"False", ReasonContextFailed}},
		{name: "failing, subjects untouched", objects: objects, fail: true, want: readyCondition{"False", ReasonContextFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newReconcilerFixture(t, append(slices.Clone(tc.objects), newEnvBinding("ns", "gh", deploymentRef("ns", "", sel), "TOKEN", "t"))...)
			calls := 0
			f.r.WithContext = func(ctx context.Context, b Bindable) (context.Context, error) {
				calls++
				if tc.fail {
					return nil, errors.New("secret not found")
				}
				return ctx, nil
			}
			err := f.r.Reconcile(context.Background(), "ns/gh")
			if tc.fail == (err == nil) {
				t.Errorf("Reconcile error = %v, want error %v", err, tc.fail)
			}
			if calls != 1 {
				t.Errorf("WithContext called %d times, want 1", calls)
			}
			if diff := cmp.Diff(tc.want, ready(f.binding(t, "ns", "gh"))); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if got := len(f.writes("deployments")); got != tc.wantEnvs {
				t.Errorf("%d deployments written, want %d", got, tc.wantEnvs)
			}
		})
	}
}

// subResources records the order of its calls and can fail.
type subResources struct {
	calls *[]string
	fail  bool
}

func (s subResources) Reconcile(context.Context, Bindable) error {
	*s.calls = append(*s.calls, "sub-resources")
	if s.fail {
		return errors.New("ConfigMap is someone else's")
	}
	return nil
}

func (s subResources) ReconcileDeletion(context.Context, Bindable) error {
	*s.calls = append(*s.calls, "sub-resources deletion")
	return nil
}

func TestBaseReconcilerSubResourcesOrder(t *testing.T) {
	bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	t.Run("reconcile: sub-resources first; their failure binds nothing", func(t *testing.T) {
		var calls []string
		f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t"), testDeployment("ns", "web", nil))
		f.r.SubResourcesReconciler = subResources{calls: &calls, fail: true}
		if err := f.r.Reconcile(context.Background(), "ns/gh"); err == nil {
			t.Error("Reconcile succeeded")
		}
		if diff := cmp.Diff(readyCondition{"False", ReasonSubResourcesFailed}, ready(f.binding(t, "ns", "gh"))); diff != "" {
			t.Errorf("Ready (-want +got):\n%s", diff)
		}
		if w := f.writes("deployments"); len(w) > 0 {
			t.Errorf("subject bound although its sub-resources failed: %v", w)
		}
	})
	t.Run("deletion: subjects unbound first", func(t *testing.T) {
		var calls []string
		now := metav1.Now()
		b := newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t")
		b.Finalizers = []string{"test.bindkit.dev/envbindings"}
		b.DeletionTimestamp = &now
		f := newReconcilerFixture(t, b, recorded(testDeployment("ns", "web", nil, bound), "gh"))
		f.r.SubResourcesReconciler = subResources{calls: &calls}
		f.client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			calls = append(calls, "unbind")
			return false, nil, nil
		})
		if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if diff := cmp.Diff([]string{"unbind", "sub-resources deletion"}, calls); diff != "" {
			t.Errorf("order (-want +got):\n%s", diff)
		}
	})
}

func TestBaseReconcilerDeletionUndoesAndReleases(t *testing.T) {
	now := metav1.Now()
	for _, subject := range []tracker.Reference{
		deploymentRef("ns", "web", nil),
		// The reference moved to a kind that is not served: what it bound
		// of the recorded kind is still unbound.
		{APIVersion: "example.com/v1", Kind: "Nothing", Namespace: "ns", Name: "x"},
	} {
		t.Run(subject.Kind, func(t *testing.T) {
			b := newEnvBinding("ns", "gh", subject, "TOKEN", "t")
			b.Finalizers = []string{"test.bindkit.dev/envbindings", "someone.else/keep"}
			b.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"}
			b.DeletionTimestamp = &now
			f := newReconcilerFixture(t, b, recorded(testDeployment("ns", "web", nil, corev1.EnvVar{Name: "TOKEN", Value: "t"}, corev1.EnvVar{Name: "KEEP", Value: "k"}), "gh"))
			if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if diff := cmp.Diff([]string{"someone.else/keep"}, f.binding(t, "ns", "gh").Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]corev1.EnvVar{{Name: "KEEP", Value: "k"}}, f.deploymentEnv(t, "ns", "web")); diff != "" {
				t.Errorf("deployment env after deletion (-want +got):\n%s", diff)
			}
			if got := f.deploymentBound(t, "ns", "web"); got != "" {
				t.Errorf("deployment still records %q", got)
			}
		})
	}
}

func TestBaseReconcilerFinalizerAlreadyGone(t *testing.T) {
	now := metav1.Now()
	b := newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t")
	b.Finalizers = []string{"test.bindkit.dev/envbindings"}
	b.DeletionTimestamp = &now
	f := newReconcilerFixture(t, b)
	cached := b.DeepCopyObject().(Bindable)
	f.r.Get = func(string, string) (Bindable, error) { return cached, nil }
	// Someone removed the finalizer (and the Binding went) after the cache
	// was filled.
	if err := f.client.Tracker().Delete(envBindingsGVR, "ns", "gh"); err != nil {
		t.Fatal(err)
	}
	f.recorder = nil
	if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
		t.Errorf("Reconcile of a Binding already released: %v", err)
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

func TestBaseReconcilerMissingFieldsAreAnError(t *testing.T) {
	r := &BaseReconciler{GVR: envBindingsGVR}
	r.Promote(func(string) {})
	err := r.Reconcile(context.Background(), "ns/gh")
	if !controller.IsPermanentError(err) {
		t.Fatalf("Reconcile = %v, want a permanent error", err)
	}
	want := "psbinding: BaseReconciler for envbindings.test.bindkit.dev: missing DynamicClient, Factory, Get, Mapper, Tracker"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
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

func TestBaseReconcilerUninstallReleasesEverything(t *testing.T) {
	bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	a := newEnvBinding("ns", "a", deploymentRef("ns", "", matchLabels("app", "web")), "TOKEN", "t")
	a.Finalizers = []string{"test.bindkit.dev/envbindings", "someone.else/keep"}
	a.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"}
	b := newEnvBinding("other", "b", deploymentRef("other", "db", nil), "TOKEN", "t")
	b.Finalizers = []string{"test.bindkit.dev/envbindings"}
	excluded := recorded(testDeployment("ns", "excluded", map[string]string{"app": "web", ExcludeLabel: "true"}, bound), "a")
	f := newReconcilerFixture(t, a, b,
		recorded(testDeployment("ns", "web", map[string]string{"app": "web"}, bound), "a"),
		excluded,
		recorded(testDeployment("other", "db", nil, bound), "b"),
	)
	if err := f.r.Uninstall(context.Background()); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	for _, d := range []struct{ ns, name string }{{"ns", "web"}, {"ns", "excluded"}, {"other", "db"}} {
		if env := f.deploymentEnv(t, d.ns, d.name); len(env) != 0 {
			t.Errorf("%s/%s still bound: %v", d.ns, d.name, env)
		}
		if got := f.deploymentBound(t, d.ns, d.name); got != "" {
			t.Errorf("%s/%s still records %q", d.ns, d.name, got)
		}
	}
	if diff := cmp.Diff([]string{"someone.else/keep"}, f.binding(t, "ns", "a").Finalizers); diff != "" {
		t.Errorf("finalizers of a (-want +got):\n%s", diff)
	}
	if got := f.binding(t, "other", "b").Finalizers; len(got) != 0 {
		t.Errorf("finalizers of b: %v", got)
	}
	// Again, with nothing left to do: no error, no write.
	f.client.ClearActions()
	if err := f.r.Uninstall(context.Background()); err != nil {
		t.Fatalf("second Uninstall: %v", err)
	}
	if w := append(f.writes("deployments"), f.writes("envbindings")...); len(w) > 0 {
		t.Errorf("second Uninstall wrote %v", w)
	}
}

// countingMetadata counts the patches sent through a metadata client.
type countingMetadata struct {
	metadata.Interface
	patches *atomic.Int64
}

func (c countingMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return countingGetter{c.Interface.Resource(gvr), c.patches}
}

type countingGetter struct {
	metadata.Getter
	patches *atomic.Int64
}

func (g countingGetter) Namespace(ns string) metadata.ResourceInterface {
	return countingResource{g.Getter.Namespace(ns), g.patches}
}

type countingResource struct {
	metadata.ResourceInterface
	patches *atomic.Int64
}

func (r countingResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	r.patches.Add(1)
	return r.ResourceInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// A selector that binds many subjects reads them with LISTs of the
// selector, not a GET each, and the patches go through the metadata client
// when the reconciler has one; a few subjects are read one by one.
// With a dynamic client whose resources are duck.RawListers (as
// duck.NewDynamicClient's are), the pages come as JSON and the subjects are
// bound alike.
func TestBaseReconcilerReadsManySubjectsWithLists(t *testing.T) {
	for _, tc := range []struct {
		subjects            int
		raw                 bool
		wantGets, wantLists int
	}{
		{subjects: listThreshold - 1, wantGets: listThreshold - 1, wantLists: 0},
		// The fake ignores Limit (one page), and its watch holds 100 events:
		// more subjects than that would overflow it while the informer reads.
		{subjects: listThreshold + 10, wantGets: 0, wantLists: 1},
		{subjects: listThreshold + 10, raw: true, wantGets: 0, wantLists: 1},
	} {
		t.Run(fmt.Sprintf("%d/raw=%v", tc.subjects, tc.raw), func(t *testing.T) {
			objects := []runtime.Object{
				newEnvBinding("ns", "gh", deploymentRef("ns", "", matchLabels("app", "web")), "TOKEN", "t"),
				testDeployment("ns", "other", map[string]string{"app": "other"}),
			}
			for i := range tc.subjects {
				objects = append(objects, testDeployment("ns", fmt.Sprintf("web-%03d", i), map[string]string{"app": "web"}))
			}
			f := newReconcilerFixture(t, objects...)
			var patches atomic.Int64
			f.r.MetadataClient = countingMetadata{injectiontest.MetadataFromDynamic(f.client), &patches}
			if tc.raw {
				f.r.DynamicClient = rawListing{f.client}
			}
			if _, _, err := f.r.Factory.Get(context.Background(), deploymentsGVR); err != nil {
				t.Fatal(err)
			}
			f.client.ClearActions()
			if err := f.r.Reconcile(context.Background(), "ns/gh"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			var gets, lists int
			for _, a := range f.client.Actions() {
				if a.GetResource() != deploymentsGVR {
					continue
				}
				switch a.GetVerb() {
				case "get":
					gets++
				case "list":
					lists++
				}
			}
			if diff := cmp.Diff([]int{tc.wantGets, tc.wantLists, tc.subjects}, []int{gets, lists, int(patches.Load())}); diff != "" {
				t.Errorf("GETs, LISTs, patches through the metadata client (-want +got):\n%s", diff)
			}
			for i := range tc.subjects {
				if got := f.deploymentBound(t, "ns", fmt.Sprintf("web-%03d", i)); got == "" {
					t.Errorf("web-%03d not bound", i)
				}
			}
			if got := f.deploymentBound(t, "ns", "other"); got != "" {
				t.Errorf("other bound: %q", got)
			}
		})
	}
}

// rawListing is a dynamic client whose namespaced resources are
// duck.RawListers, as duck.NewDynamicClient's are: each page is the JSON a
// kube-apiserver sends (items without apiVersion and kind), read by
// duck.DecodeRawList.
type rawListing struct{ dynamic.Interface }

func (c rawListing) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return rawListingResource{c.Interface.Resource(gvr)}
}

type rawListingResource struct {
	dynamic.NamespaceableResourceInterface
}

func (r rawListingResource) Namespace(ns string) dynamic.ResourceInterface {
	return rawListingNamespaced{r.NamespaceableResourceInterface.Namespace(ns)}
}

type rawListingNamespaced struct{ dynamic.ResourceInterface }

func (r rawListingNamespaced) ListRaw(ctx context.Context, opts metav1.ListOptions) (*duck.RawList, error) {
	list, err := r.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	items := make([]any, len(list.Items))
	for i, item := range list.Items {
		obj := item.DeepCopy().Object
		delete(obj, "apiVersion")
		delete(obj, "kind")
		items[i] = obj
	}
	data, err := json.Marshal(map[string]any{
		"apiVersion": "apps/v1", "kind": "DeploymentList",
		"metadata": map[string]any{"continue": list.GetContinue()}, "items": items,
	})
	if err != nil {
		return nil, err
	}
	return duck.DecodeRawList(data)
}

// TestPatchConcurrencySharedByReconciles checks that PatchConcurrency bounds
// the subject patches in flight over every reconcile the controller runs at
// once, not per reconcile: sharedmain runs several workers per controller.
func TestPatchConcurrencySharedByReconciles(t *testing.T) {
	objects := []runtime.Object{
		newEnvBinding("ns", "a", deploymentRef("ns", "", matchLabels("app", "a")), "TOKEN", "a"),
		newEnvBinding("other", "b", deploymentRef("other", "", matchLabels("app", "b")), "TOKEN", "b"),
	}
	for i := range 6 {
		objects = append(objects,
			testDeployment("ns", fmt.Sprintf("a%d", i), map[string]string{"app": "a"}),
			testDeployment("other", fmt.Sprintf("b%d", i), map[string]string{"app": "b"}))
	}
	f := newReconcilerFixture(t, objects...)
	f.r.PatchConcurrency = 2
	// The fake client runs one action at a time, so the patches in flight
	// are counted around it.
	counter := &inFlight{}
	f.r.MetadataClient = inFlightMetadata{injectiontest.MetadataFromDynamic(f.client), counter}
	var wg sync.WaitGroup
	for _, key := range []string{"ns/a", "other/b"} {
		wg.Go(func() {
			if err := f.r.Reconcile(context.Background(), key); err != nil {
				t.Errorf("Reconcile %s: %v", key, err)
			}
		})
	}
	wg.Wait()
	if got := counter.total.Load(); got != 12 {
		t.Errorf("%d subject patches, want 12", got)
	}
	if got := counter.most.Load(); got != 2 {
		t.Errorf("at most %d subject patches in flight over both reconciles, want 2 (PatchConcurrency)", got)
	}
}

// inFlight counts the patches under way, the most at once, and the total.
type inFlight struct{ now, most, total atomic.Int64 }

func (c *inFlight) patch(do func() (*metav1.PartialObjectMetadata, error)) (*metav1.PartialObjectMetadata, error) {
	n := c.now.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(20 * time.Millisecond) // long enough for the patches to overlap
	defer func() { c.now.Add(-1); c.total.Add(1) }()
	return do()
}

// inFlightMetadata counts the patches sent through it with an inFlight.
type inFlightMetadata struct {
	metadata.Interface
	counter *inFlight
}

func (c inFlightMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return inFlightGetter{c.Interface.Resource(gvr), c.counter}
}

type inFlightGetter struct {
	metadata.Getter
	counter *inFlight
}

func (g inFlightGetter) Namespace(ns string) metadata.ResourceInterface {
	return inFlightResource{g.Getter.Namespace(ns), g.counter}
}

type inFlightResource struct {
	metadata.ResourceInterface
	counter *inFlight
}

func (r inFlightResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	return r.counter.patch(func() (*metav1.PartialObjectMetadata, error) {
		return r.ResourceInterface.Patch(ctx, name, pt, data, opts, sub...)
	})
}

// TestBaseReconcilerInvalidBindingAppliesNothing: a Binding that
// Settings.Validate refuses patches no subject, publishes nothing and is
// not Ready, its reason and message naming what is wrong; fixed, it binds.
func TestBaseReconcilerInvalidBindingAppliesNothing(t *testing.T) {
	b := newEnvBinding("ns", "gh", deploymentRef("", "web", nil), "TOKEN", "bad value")
	f := newReconcilerFixture(t, b, testDeployment("ns", "web", nil))
	f.r.Validate = func(b Bindable) error {
		if v := b.(*envBinding).Spec.Env.Value; v == "bad value" {
			return fmt.Errorf("spec.value %q: no spaces", v)
		}
		return nil
	}
	err := f.r.Reconcile(context.Background(), "ns/gh")
	if !controller.IsPermanentError(err) {
		t.Errorf("Reconcile: %v, want a permanent error", err)
	}
	got := f.binding(t, "ns", "gh")
	if diff := cmp.Diff(readyCondition{"False", ReasonBindingInvalid}, ready(got)); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
	if c := got.Status.GetCondition(duck.ConditionReady); c == nil || !strings.Contains(c.Message, `spec.value "bad value": no spaces`) {
		t.Errorf("Ready message %+v does not name the field", c)
	}
	if env := f.deploymentEnv(t, "ns", "web"); len(env) != 0 {
		t.Errorf("the Deployment was bound: %v", env)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource() == deploymentsGVR {
			t.Errorf("a subject was patched: %v", a)
		}
	}
}
