package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/internal/fixtures"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// reconcileSubjects is how many Deployments one Binding selects.
const reconcileSubjects = 1000

// envBindingsGVR is the EnvBinding test CRD of psbinding/testdata.
var envBindingsGVR = schema.GroupVersionResource{Group: "test.bindkit.dev", Version: "v1", Resource: "envbindings"}

// boundEnv is what the Binding adds to every container of every subject.
var boundEnv = corev1.EnvVar{Name: "BOUND_BY", Value: "bench"}

// envBinding is the Binding of the reconcile benchmark, stored as the
// EnvBinding CRD: Do appends spec.env to every container, Undo removes it.
type envBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              envBindingSpec `json:"spec"`
	Status            duck.Status    `json:"status,omitempty"`
}

type envBindingSpec struct {
	Subject tracker.Reference `json:"subject"`
	Env     corev1.EnvVar     `json:"env"`
}

var _ psbinding.Bindable = (*envBinding)(nil)

func (b *envBinding) GetSubject() tracker.Reference         { return b.Spec.Subject }
func (b *envBinding) GetBindingStatus() duck.BindableStatus { return &b.Status }

func (b *envBinding) DeepCopyObject() runtime.Object {
	out := *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b.Status.DeepCopyInto(&out.Status)
	if b.Spec.Subject.Selector != nil {
		out.Spec.Subject.Selector = b.Spec.Subject.Selector.DeepCopy()
	}
	return &out
}

func (b *envBinding) Do(_ context.Context, wp *duck.WithPod) {
	for i := range wp.Spec.Template.Spec.Containers {
		c := &wp.Spec.Template.Spec.Containers[i]
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == b.Spec.Env.Name }) {
			c.Env = append(c.Env, b.Spec.Env)
		}
	}
}

func (b *envBinding) Undo(_ context.Context, wp *duck.WithPod) {
	for i := range wp.Spec.Template.Spec.Containers {
		c := &wp.Spec.Template.Spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == b.Spec.Env.Name })
	}
}

// BenchmarkReconcile1000 binds 1,000 realistic Deployments in one namespace
// against the real kube-apiserver (issue 7 part 3). impl=bindkit runs
// psbinding.BaseReconciler.Reconcile on one selector Binding, subjects read
// from its duck informer; impl=floor is a plain client-go loop that sends
// the same JSON patches with the same concurrency. Each iteration uses a
// fresh namespace whose Deployments are created with the timer stopped;
// the timed part ends when every subject is patched. sec/op is one whole
// reconcile of 1,000 subjects.
func BenchmarkReconcile1000(b *testing.B) {
	env := startControlPlane(b, "../psbinding/testdata/crds.yaml")
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	deploymentsGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

	// setup makes a namespace of reconcileSubjects Deployments, all labelled
	// tier=backend by the fixture, with the timer stopped.
	setup := func(b *testing.B) (string, []*appsv1.Deployment) {
		b.Helper()
		ns := env.CreateNamespace(b, "reconcile-")
		deps, err := createDeployments(context.Background(), kube, ns, reconcileSubjects, 16, nil)
		if err != nil {
			b.Fatal(err)
		}
		return ns, deps
	}

	b.Run("impl=bindkit", func(b *testing.B) {
		ctx := context.Background()
		stop := make(chan struct{})
		b.Cleanup(func() { close(stop) })
		var (
			mu       sync.Mutex
			bindings = map[types.NamespacedName]*envBinding{}
		)
		get := func(ns, name string) (psbinding.Bindable, error) {
			mu.Lock()
			defer mu.Unlock()
			if bd, ok := bindings[types.NamespacedName{Namespace: ns, Name: name}]; ok {
				return bd, nil
			}
			return nil, fmt.Errorf("envbinding %s/%s not created by the benchmark", ns, name)
		}
		// The tracker's callback would enqueue the Binding again for each
		// subject event; the benchmark counts the events instead, so the
		// informer does the work it does in a controller.
		var events int
		trk := tracker.New(func(tracker.Observer) { mu.Lock(); events++; mu.Unlock() }, time.Hour)
		factory := &duck.CachedInformerFactory{Stop: stop, Delegate: &duck.EnqueueInformerFactory{
			Delegate:     &duck.TypedInformerFactory{Client: dyn},
			EventHandler: psbinding.SubjectEventHandler(trk, func(err error) { b.Errorf("tracker: %v", err) }),
		}}
		r := &psbinding.BaseReconciler{
			GVR: envBindingsGVR, Get: get, DynamicClient: dyn, Factory: factory, Mapper: mapper, Tracker: trk,
		}
		r.Promote(func(string) {})
		_, lister, err := factory.Get(ctx, deploymentsGVR)
		if err != nil {
			b.Fatal(err)
		}

		meter := newCPUMeter(env)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			ns, _ := setup(b)
			bd := &envBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "test.bindkit.dev/v1", Kind: "EnvBinding"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bind-all"},
				Spec: envBindingSpec{Env: boundEnv, Subject: tracker.Reference{
					APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns,
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "backend"}},
				}},
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bd)
			if err != nil {
				b.Fatal(err)
			}
			created, err := dyn.Resource(envBindingsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: raw}, metav1.CreateOptions{})
			if err != nil {
				b.Fatalf("create envbinding %s/bind-all: %v", ns, err)
			}
			bd.ResourceVersion, bd.UID = created.GetResourceVersion(), created.GetUID()
			mu.Lock()
			bindings[types.NamespacedName{Namespace: ns, Name: bd.Name}] = bd
			mu.Unlock()
			// The informer must hold every subject before the clock runs,
			// as it does in a controller that has been up for a while.
			waitFor(b, "informer holds the namespace's Deployments", func() bool {
				objs, err := lister.ByNamespace(ns).List(labels.Everything())
				return err == nil && len(objs) == reconcileSubjects
			})
			b.StartTimer()
			meter.start()

			if err := r.Reconcile(ctx, ns+"/bind-all"); err != nil {
				b.Fatalf("reconcile %s/bind-all: %v", ns, err)
			}

			meter.stop()
			b.StopTimer()
			checkBound(b, kube, ns)
			b.StartTimer()
		}
		reportPatchRate(b)
		meter.report(b)
	})

	b.Run("impl=floor", func(b *testing.B) {
		ctx := context.Background()
		checkFloorOps(b)
		meter := newCPUMeter(env)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			ns, deps := setup(b)
			b.StartTimer()
			meter.start()

			if err := floorPatch(ctx, kube, deps, psbinding.DefaultPatchConcurrency); err != nil {
				b.Fatal(err)
			}

			meter.stop()
			b.StopTimer()
			checkBound(b, kube, ns)
			b.StartTimer()
		}
		reportPatchRate(b)
		meter.report(b)
	})
}

// floorOps are the JSON patch operations that bind d: the resourceVersion
// test the BaseReconciler guards every patch with, and boundEnv appended to
// each container's env.
func floorOps(d *appsv1.Deployment) []map[string]any {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": d.ResourceVersion}}
	for i, c := range d.Spec.Template.Spec.Containers {
		ops = append(ops, map[string]any{
			"op": "add", "path": fmt.Sprintf("/spec/template/spec/containers/%d/env/%d", i, len(c.Env)),
			"value": map[string]any{"name": boundEnv.Name, "value": boundEnv.Value},
		})
	}
	return ops
}

// floorPatch is the floor: each Deployment gets its JSON patch through the
// typed client, workers at a time, with nothing else around it.
func floorPatch(ctx context.Context, kube kubernetes.Interface, deps []*appsv1.Deployment, workers int) error {
	sem := make(chan struct{}, workers)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, d := range deps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			patch, err := json.Marshal(floorOps(d))
			if err == nil {
				_, err = kube.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("apps/v1 Deployment %s/%s: patch: %w", d.Namespace, d.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d patches failed, first: %w", len(errs), len(deps), errs[0])
	}
	return nil
}

// checkFloorOps proves that the floor sends what bindkit sends: bindkit's
// patch for the fixture (the ops of its Deployment shape, after the same
// resourceVersion test) equals floorOps, as JSON.
func checkFloorOps(b *testing.B) {
	b.Helper()
	d := fixtures.RealisticDeployment("ns", "d-00000")
	d.ResourceVersion = "42"
	raw, err := json.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	shape := duck.Shapes{}.For(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	before, err := shape.Decode(raw)
	if err != nil {
		b.Fatal(err)
	}
	after := before.DeepCopy()
	(&envBinding{Spec: envBindingSpec{Env: boundEnv}}).Do(context.Background(), after)
	ops, err := shape.CreatePatch(before, after)
	if err != nil {
		b.Fatal(err)
	}
	bindkitPatch, err := json.Marshal(append([]any{map[string]any{"op": "test", "path": "/metadata/resourceVersion", "value": "42"}}, anySlice(ops)...))
	if err != nil {
		b.Fatal(err)
	}
	floorPatch, err := json.Marshal(floorOps(d))
	if err != nil {
		b.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(floorPatch, &got); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(bindkitPatch, &want); err != nil {
		b.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		b.Fatalf("floor patch differs from bindkit's (-bindkit +floor):\n%s", diff)
	}
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// checkBound fails b unless every Deployment of ns carries boundEnv exactly
// once in every container, as the server stores it.
func checkBound(b *testing.B, kube kubernetes.Interface, ns string) {
	b.Helper()
	list, err := kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatalf("list deployments in %s: %v", ns, err)
	}
	if len(list.Items) != reconcileSubjects {
		b.Fatalf("namespace %s has %d Deployments, want %d", ns, len(list.Items), reconcileSubjects)
	}
	for _, d := range list.Items {
		for _, c := range d.Spec.Template.Spec.Containers {
			n := 0
			for _, e := range c.Env {
				if e == boundEnv {
					n++
				}
			}
			if n != 1 {
				b.Fatalf("apps/v1 Deployment %s/%s container %s has %s %d times, want once", ns, d.Name, c.Name, boundEnv.Name, n)
			}
		}
	}
}

// waitFor polls cond every 50ms for up to a minute, with the timer stopped.
func waitFor(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reportPatchRate reports subjects patched per second of timed work.
func reportPatchRate(b *testing.B) {
	if secs := b.Elapsed().Seconds(); secs > 0 {
		b.ReportMetric(float64(reconcileSubjects*b.N)/secs, "patches/s")
	}
}
