package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
	"k8s.io/client-go/metadata"

	"github.com/bindkit/bindkit/duck"
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
// against the real kube-apiserver, in process and unthrottled (testenv's
// client configuration): the in-process equivalent of BenchmarkBind, for
// `go test -cpuprofile`. impl=bindkit runs psbinding.BaseReconciler.Reconcile
// on one selector Binding, its subjects in the shared slim metadata cache as
// injection builds it (duck.CachedInformerFactory over
// duck.MetadataInformerFactory, with the kind's handler through
// duck.EnqueueInformerFactory); the reconciler reads each subject's full
// object with a GET before it patches it. impl=floor is a plain client-go
// loop that sends the same JSON patches (bindkitPatch) with the same
// concurrency. Each iteration uses a fresh namespace whose Deployments are
// created with the timer stopped, and deletes them afterwards; the timed part
// ends when every subject is patched. sec/op is one whole reconcile of 1,000
// subjects.
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
		// The process's shared subject cache, as injection builds it, and
		// the Binding kind's handler on it, as NewReconcilerImpl adds it.
		factory := &duck.EnqueueInformerFactory{
			Delegate: &duck.CachedInformerFactory{Stop: stop, Delegate: &duck.MetadataInformerFactory{
				Client: metadata.NewForConfigOrDie(env.Config), Mapper: mapper,
			}},
			EventHandler: psbinding.SubjectEventHandler(trk, func(err error) { b.Errorf("tracker: %v", err) }),
		}
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
			deleteDeployments(b, kube, ns)
			b.StartTimer()
		}
		reportPatchRate(b)
		meter.report(b)
	})

	b.Run("impl=floor", func(b *testing.B) {
		ctx := context.Background()
		binding := &envBinding{Spec: envBindingSpec{Env: boundEnv}}
		by := duck.BoundBy{Resource: envBindingsGVR.GroupResource(), Name: "bind-all"}
		meter := newCPUMeter(env)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			ns, deps := setup(b)
			patches, err := bindkitPatches(deps, func(wp *duck.WithPod) { binding.Do(ctx, wp) }, by, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			meter.start()

			if err := sendPatches(ctx, kube, patches, psbinding.DefaultPatchConcurrency); err != nil {
				b.Fatal(err)
			}

			meter.stop()
			b.StopTimer()
			checkBound(b, kube, ns)
			deleteDeployments(b, kube, ns)
			b.StartTimer()
		}
		reportPatchRate(b)
		meter.report(b)
	})
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
