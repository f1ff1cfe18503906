package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
)

// manySizesEnv lists the numbers of namespaces BenchmarkManyBindings uses,
// comma-separated; the default is 100.
const manySizesEnv = "BINDKIT_BENCH_MANY_SIZES"

// manyDeployments is how many Deployments each namespace holds.
const manyDeployments = 3

// BenchmarkManyBindings times the common shape (issue 25 item 3): n
// namespaces, each with one selector GithubBinding and 3 Deployments,
// through the example binary (default flags, ports the kernel picks),
// against a client-go floor that sends the same necessary writes. The timer runs
// from the first Binding's create until every Binding is Ready (floor: has
// its status written), the n creates included for both. impl=bindkit: a
// fresh controller, ready before the timer starts, does the rest. impl=floor:
// no controller; this process sends, per namespace, the create, the
// finalizer patch, the 3 JSON patches bindkit would send (computed
// beforehand with bindkit's duck code) and the status update, with
// psbinding.DefaultPatchConcurrency namespaces at a time. It reports the
// requests the kube-apiserver counted on deployments by verb, the
// controller's peak RSS, and CPU: the sender's (client-cpu-s/op: the
// controller, or this process for the floor), the kube-apiserver's and
// etcd's (server-cpu-s/op, etcd's part in etcd-cpu-s/op). On a shared
// machine the CPU moves less with the load than the wall time does. With BINDKIT_BENCH_CPUPROFILE=<dir>, as for
// BenchmarkBind, the controller's CPU profile of each timed part lands in
// dir.
func BenchmarkManyBindings(b *testing.B) {
	sizes := []int{100}
	if v := os.Getenv(manySizesEnv); v != "" {
		sizes = nil
		for part := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want positive numbers, comma-separated", manySizesEnv, v)
			}
			sizes = append(sizes, n)
		}
	}
	env := startControlPlane(b, "../"+demo.CRDPath)
	mb := &manyBench{bindBench: *newBindBench(b, env)}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d/impl=floor", n), func(b *testing.B) { mb.floor(b, n) })
		b.Run(fmt.Sprintf("n=%d/impl=bindkit", n), func(b *testing.B) { mb.bindkit(b, n) })
	}
}

type manyBench struct{ bindBench }

// setup makes n namespaces, each with the Secret and 3 Deployments.
func (mb *manyBench) setup(b *testing.B, prefix string, n int) (map[string][]*appsv1.Deployment, []string) {
	b.Helper()
	namespaces := make([]string, n)
	for i := range n {
		namespaces[i] = mb.env.CreateNamespace(b, prefix)
	}
	deps := make(map[string][]*appsv1.Deployment, n)
	var mu sync.Mutex
	err := forEach(namespaces, 16, func(ns string) error {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bindSecretName}, StringData: map[string]string{"token": "not-a-real-token"}}
		if _, err := mb.kube.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
			return err
		}
		d, err := createDeployments(context.Background(), mb.kube, ns, manyDeployments, 1, nil)
		mu.Lock()
		deps[ns] = d
		mu.Unlock()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return deps, namespaces
}

// forEach runs f on every item with workers goroutines; the first error.
func forEach[T any](items []T, workers int, f func(T) error) error {
	next := make(chan T)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range next {
				if err := f(it); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

func manyBinding(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"namespace": ns, "name": bindBindingName},
		"spec": map[string]any{
			"subject": map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"selector": map[string]any{"matchLabels": map[string]any{"tier": "backend"}},
			},
			"secret": map[string]any{"name": bindSecretName},
		},
	}}
}

// floor sends the necessary writes from this process.
func (mb *manyBench) floor(b *testing.B, n int) {
	ctx := context.Background()
	bindings := mb.dyn.Resource(v1alpha1.GroupVersionResource())
	gvr := v1alpha1.GroupVersionResource()
	finalizer := gvr.Group + "/" + gvr.Resource
	by := duck.BoundBy{Resource: gvr.GroupResource(), Name: bindBindingName}
	var m runMetrics
	for range b.N {
		b.StopTimer()
		deps, namespaces := mb.setup(b, "many-floor-", n)
		patches := map[string][]floorPatch{}
		for ns, d := range deps {
			p, err := bindkitPatches(d, githubDo, by, 1)
			if err != nil {
				b.Fatal(err)
			}
			patches[ns] = p
		}
		finalizerPatch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": []string{finalizer}}})
		before := readRequestCounts(b, mb.kube)
		c0, s0, e0 := selfCPU(), pidsCPU(mb.env.PIDs()), mb.etcdCPU()
		b.StartTimer()

		err := forEach(namespaces, psbinding.DefaultPatchConcurrency, func(ns string) error {
			if _, err := bindings.Namespace(ns).Create(ctx, manyBinding(ns), metav1.CreateOptions{}); err != nil {
				return err
			}
			got, err := bindings.Namespace(ns).Patch(ctx, bindBindingName, types.MergePatchType, finalizerPatch, metav1.PatchOptions{})
			if err != nil {
				return err
			}
			if err := sendPatches(ctx, mb.kube, patches[ns], 1); err != nil {
				return err
			}
			now := metav1.Now().UTC().Format(time.RFC3339)
			conds := []any{}
			for _, t := range []string{duck.ConditionBindingAvailable, duck.ConditionReady} {
				conds = append(conds, map[string]any{"type": t, "status": "True", "lastTransitionTime": now, "reason": "BindingAvailable", "message": ""})
			}
			got.Object["status"] = map[string]any{"observedGeneration": int64(1), "conditions": conds}
			_, err = bindings.Namespace(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err
		})

		b.StopTimer()
		m.client += selfCPU() - c0
		m.server += pidsCPU(mb.env.PIDs()) - s0
		m.etcd += mb.etcdCPU() - e0
		m.addRequests(readRequestCounts(b, mb.kube).sub(before))
		if err != nil {
			b.Fatalf("floor: %v", err)
		}
		// Let the Bindings go, so the next controller has none of them.
		forEach(namespaces, 16, func(ns string) error {
			bindings.Namespace(ns).Patch(ctx, bindBindingName, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			return bindings.Namespace(ns).Delete(ctx, bindBindingName, metav1.DeleteOptions{})
		})
		b.StartTimer()
	}
	m.report(b, n)
}

// bindkit creates the n Bindings and lets a fresh controller make them
// Ready.
func (mb *manyBench) bindkit(b *testing.B, n int) {
	ctx := context.Background()
	bindings := mb.dyn.Resource(v1alpha1.GroupVersionResource())
	var m runMetrics
	for range b.N {
		b.StopTimer()
		_, namespaces := mb.setup(b, "many-bindkit-", n)
		var profile string
		var extraEnv []string
		if mb.profileDir != "" {
			profile = filepath.Join(mb.profileDir, fmt.Sprintf("controller-many-n%d-%d.prof", n, time.Now().Unix()))
			extraEnv = append(extraEnv, "BINDKIT_CPUPROFILE="+profile)
		}
		ctrl := startController(b, mb.env, mb.binary, extraEnv...)
		before := readRequestCounts(b, mb.kube)
		c0, s0, e0 := ctrl.cpu(), pidsCPU(mb.env.PIDs()), mb.etcdCPU()
		if profile != "" {
			toggleProfile(b, ctrl)
		}
		b.StartTimer()

		err := forEach(namespaces, psbinding.DefaultPatchConcurrency, func(ns string) error {
			_, err := bindings.Namespace(ns).Create(ctx, manyBinding(ns), metav1.CreateOptions{})
			return err
		})
		if err == nil {
			err = waitAllReady(ctx, mb.dyn, namespaces, 10*time.Minute, ctrl.exited)
		}

		b.StopTimer()
		m.client += ctrl.cpu() - c0
		m.server += pidsCPU(mb.env.PIDs()) - s0
		m.etcd += mb.etcdCPU() - e0
		m.addRequests(readRequestCounts(b, mb.kube).sub(before))
		if profile != "" {
			toggleProfile(b, ctrl)
			waitProfile(b, profile)
		}
		if err != nil {
			b.Fatalf("bindkit: %v\ncontroller log:\n%s", err, ctrl.logTail())
		}
		m.peak = max(m.peak, ctrl.memory(b).hwm)
		// Every subject bound, checked once, untimed.
		for _, ns := range namespaces {
			list, err := mb.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				if !githubBound(&list.Items[i]) {
					bd, _ := bindings.Namespace(ns).Get(ctx, bindBindingName, metav1.GetOptions{})
					b.Fatalf("Deployment %s/%s not bound although its Binding is Ready: volumes %v\nbinding %v", ns, list.Items[i].Name, list.Items[i].Spec.Template.Spec.Volumes, bd.Object["status"])
				}
			}
		}
		forEach(namespaces, 16, func(ns string) error {
			return bindings.Namespace(ns).Delete(ctx, bindBindingName, metav1.DeleteOptions{})
		})
		poll(b, 5*time.Minute, "Bindings deleted", func() (bool, error) {
			list, err := bindings.List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil && len(list.Items) == 0, nil
		})
		waitWebhookIdle(b, mb.kube)
		ctrl.stop(b)
		b.StartTimer()
	}
	m.report(b, n)
}

// waitAllReady watches the GithubBindings until the one of each of
// namespaces is Ready for its generation, the controller exits, or
// timeout. Bindings of other namespaces (a failed run's) are not counted.
// It watches rather than polls: a LIST of every Binding every few
// milliseconds would load the kube-apiserver the controller is measured
// on, and the floor is not observed that way.
func waitAllReady(ctx context.Context, dyn dynamic.Interface, namespaces []string, timeout time.Duration, exited func() error) error {
	ours := make(map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		ours[ns] = true
	}
	var mu sync.Mutex
	ready := map[string]bool{}
	all := make(chan struct{})
	see := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || !ours[u.GetNamespace()] || !bindingReady(u) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !ready[u.GetNamespace()] {
			ready[u.GetNamespace()] = true
			if len(ready) == len(ours) {
				close(all)
			}
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	inf := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0).ForResource(v1alpha1.GroupVersionResource()).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }}); err != nil {
		return err
	}
	go inf.Run(stop)
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("%d of %d GithubBindings Ready after %v", len(ready), len(ours), timeout)
		case <-tick.C:
			if err := exited(); err != nil {
				return err
			}
		}
	}
}

// bindingReady reports a Binding Ready for its generation.
func bindingReady(u *unstructured.Unstructured) bool {
	gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if gen != u.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] == duck.ConditionReady && cm["status"] == "True" {
			return true
		}
	}
	return false
}
