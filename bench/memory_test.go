package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// memorySubjects is how many Deployments the caches hold.
const memorySubjects = 10000

// memoryEnv gates BenchmarkSubjectCache10000: creating 10,000 Deployments
// takes a minute or more, too long for every `-bench .`.
const memoryEnv = "BINDKIT_BENCH_MEMORY"

// settle is how long a process runs after its cache synced before its
// resident set is read, so that start-up work is over.
const settle = 5 * time.Second

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// BenchmarkSubjectCache10000 compares what it costs to cache 10,000
// realistic Deployments (issue 14 part 3): bindkit's shared subject cache
// against client-go's typed Deployment informer, the cache a controller
// that watches Deployments otherwise keeps.
//
// cache=heap, in this process: impl=bindkit is the cache as injection
// builds it, a duck.CachedInformerFactory over a duck.MetadataInformerFactory
// (metadata client, the slimming transform, namespace and BoundIndex
// indexes); impl=typed is informers.NewSharedInformerFactory's Deployment
// informer; impl=typed-no-managedfields, a diagnostic, drops managedFields
// with a transform. Each iteration collects garbage, builds and starts the
// cache and waits for it to sync (sec/op: list and sync), collects garbage
// again and reports the growth of HeapInuse (heap-B, heap-B/object) with
// the cache live, then stops it.
//
// cache=process, separate processes: impl=bindkit is the example controller
// binary with default flags, whose subject cache starts when a
// GithubBinding names Deployments (here one that selects none, so nothing
// is patched); sec/op runs from the Binding's creation until it is Ready,
// which the reconciler reports after the cache synced. impl=typed is
// cmd/typedinformer, client-go's typed Deployment informer alone; sec/op
// runs from its go-ahead until it reports its cache synced. Each reports
// its resident set settle after sync (rss-B, VmRSS) and its peak
// (peak-rss-B, VmHWM), and both again less the same process's figures
// with no Deployment in the cluster, measured first (cache-rss-B,
// cache-peak-B): what the cache of 10,000 costs the process.
//
// Run it with
//
//	BINDKIT_BENCH_MEMORY=1 go test -run '^$' -bench SubjectCache10000 -benchtime 1x -count 3 ./
func BenchmarkSubjectCache10000(b *testing.B) {
	if os.Getenv(memoryEnv) != "1" {
		b.Skipf("set %s=1 to create %d Deployments and measure subject caches", memoryEnv, memorySubjects)
	}
	env := startControlPlane(b, "../"+demo.CRDPath)
	cb := &cacheBench{
		env:        env,
		kube:       kubernetes.NewForConfigOrDie(env.Config),
		dyn:        dynamic.NewForConfigOrDie(env.Config),
		controller: buildBinary(b, controllerPackage),
		typed:      buildBinary(b, typedInformerPackage),
	}
	createSystemNamespace(b, cb.kube)

	// The processes' figures with an empty cache, before any Deployment
	// exists.
	cb.baseNS = env.CreateNamespace(b, "cache-base-")
	baseline := map[string]memory{}
	baseline["bindkit"] = cb.controllerCache(b, 0)
	baseline["typed"] = cb.typedCache(b, 0)

	ns := env.CreateNamespace(b, "cache-")
	start := time.Now()
	if _, err := createDeployments(context.Background(), cb.kube, ns, memorySubjects, 16, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d Deployments in %s", memorySubjects, time.Since(start).Round(time.Second))

	md := metadata.NewForConfigOrDie(env.Config)
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	// The process keeps one mapper for every cache; ask it once so that
	// its discovery data is not counted as the first cache's.
	if _, err := mapper.KindFor(deploymentsGVR); err != nil {
		b.Fatal(err)
	}
	heapCases := []struct {
		name string
		// start builds and starts a cache on stop and returns once it has
		// synced.
		start func(b *testing.B, stop chan struct{}) cache.SharedIndexInformer
	}{
		{"bindkit", func(b *testing.B, stop chan struct{}) cache.SharedIndexInformer {
			f := &duck.CachedInformerFactory{Stop: stop, Delegate: &duck.MetadataInformerFactory{Client: md, Mapper: mapper}}
			inf, _, err := f.Get(context.Background(), deploymentsGVR)
			if err != nil {
				b.Fatal(err)
			}
			return inf
		}},
		{"typed", func(b *testing.B, stop chan struct{}) cache.SharedIndexInformer {
			return runSynced(b, informers.NewSharedInformerFactory(cb.kube, 0).Apps().V1().Deployments().Informer(), stop)
		}},
		// A diagnostic, not the comparison: how much of the typed
		// informer managedFields are.
		{"typed-no-managedfields", func(b *testing.B, stop chan struct{}) cache.SharedIndexInformer {
			inf := informers.NewSharedInformerFactory(cb.kube, 0).Apps().V1().Deployments().Informer()
			if err := inf.SetTransform(dropManagedFields); err != nil {
				b.Fatal(err)
			}
			return runSynced(b, inf, stop)
		}},
	}
	for _, c := range heapCases {
		b.Run("cache=heap/impl="+c.name, func(b *testing.B) {
			var grown uint64
			for range b.N {
				b.StopTimer()
				before := heapInuse()
				stop := make(chan struct{})
				b.StartTimer()

				inf := c.start(b, stop)

				b.StopTimer()
				after := heapInuse()
				writeHeapProfile(b, c.name)
				if n := len(inf.GetStore().ListKeys()); n != memorySubjects {
					b.Fatalf("cache holds %d objects, want %d", n, memorySubjects)
				}
				close(stop)
				// The informer's goroutines return shortly after stop;
				// the next case's baseline must not count what they held.
				time.Sleep(time.Second)
				grown = after - min(before, after)
				b.StartTimer()
			}
			b.ReportMetric(float64(grown), "heap-B")
			b.ReportMetric(float64(grown)/memorySubjects, "heap-B/object")
		})
	}

	processCases := []struct {
		name string
		run  func(b *testing.B, want int) memory
	}{
		{"bindkit", cb.controllerCache},
		{"typed", cb.typedCache},
	}
	for _, c := range processCases {
		b.Run("cache=process/impl="+c.name, func(b *testing.B) {
			var m memory
			for range b.N {
				// run times only the sync, not the process's start and stop.
				b.StopTimer()
				mi := c.run(b, memorySubjects)
				m.rss, m.hwm = max(m.rss, mi.rss), max(m.hwm, mi.hwm)
				b.StartTimer()
			}
			base := baseline[c.name]
			b.ReportMetric(float64(m.rss), "rss-B")
			b.ReportMetric(float64(m.hwm), "peak-rss-B")
			b.ReportMetric(float64(m.rss)-float64(base.rss), "cache-rss-B")
			b.ReportMetric(float64(m.hwm)-float64(base.hwm), "cache-peak-B")
			b.Logf("%s with no Deployments: rss %.1f MiB, peak %.1f MiB", c.name, float64(base.rss)/(1<<20), float64(base.hwm)/(1<<20))
		})
	}
}

type cacheBench struct {
	env               *testenv.Environment
	kube              kubernetes.Interface
	dyn               dynamic.Interface
	controller, typed string
	baseNS            string
}

// controllerCache starts the example controller, creates a GithubBinding
// over Deployments that selects none of them, and waits, with a watch, for
// it to be Ready: the reconciler has then synced its subject cache (want
// Deployments) and found nothing to patch. The timer runs from the
// Binding's creation to Ready. It returns the process's memory settle
// later, then deletes the Binding and stops the controller.
func (cb *cacheBench) controllerCache(b *testing.B, want int) memory {
	b.Helper()
	ctx := context.Background()
	ctrl := startController(b, cb.env, cb.controller)
	bindings := cb.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(cb.baseNS)
	name := "cache-" + strconv.Itoa(want)
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"subject": map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"selector": map[string]any{"matchLabels": map[string]any{"tier": "none"}},
			},
			"secret": map[string]any{"name": bindSecretName},
		},
	}}
	w, err := bindings.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatalf("watch GithubBinding %s/%s: %v", cb.baseNS, name, err)
	}
	defer w.Stop()
	b.StartTimer()
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create GithubBinding %s/%s: %v", cb.baseNS, name, err)
	}
	timeout := time.After(5 * time.Minute)
	for ready := false; !ready; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("watch of GithubBinding %s/%s ended", cb.baseNS, name)
			}
			if u, isU := ev.Object.(*unstructured.Unstructured); isU && ev.Type != watch.Deleted {
				ready = isReady(u)
			}
		case <-timeout:
			b.Fatalf("GithubBinding %s/%s not Ready after 5 minutes\ncontroller log:\n%s", cb.baseNS, name, ctrl.logTail())
		}
	}
	b.StopTimer()
	time.Sleep(settle)
	m := ctrl.memory(b)

	if err := bindings.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		b.Fatalf("delete GithubBinding %s/%s: %v", cb.baseNS, name, err)
	}
	poll(b, 5*time.Minute, "GithubBinding "+name+" gone", func() (bool, error) {
		_, err := bindings.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitWebhookIdle(b, cb.kube)
	ctrl.stop(b)
	return m
}

// isReady reports whether a Binding's Ready condition is True for its
// current generation.
func isReady(u *unstructured.Unstructured) bool {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// typedCache runs cmd/typedinformer until its cache of want Deployments has
// synced, the timer running from its go-ahead to its report of the sync,
// and returns its memory settle later.
func (cb *cacheBench) typedCache(b *testing.B, want int) memory {
	b.Helper()
	p := startProcess(b, cb.env.Dir, cb.typed, []string{"--kubeconfig=" + cb.env.KubeconfigPath}, nil, true)
	defer p.stop(b)
	readLine := func(wantPrefix string) string {
		line, err := p.stdout.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, wantPrefix) {
			b.Fatalf("typedinformer: read %q (%v), want %q\n%s", line, err, wantPrefix, p.logTail())
		}
		return strings.TrimSpace(line)
	}
	readLine("ready")
	b.StartTimer()
	if _, err := fmt.Fprintln(p.stdin, "go"); err != nil {
		b.Fatal(err)
	}
	synced := readLine("synced ")
	b.StopTimer()
	if got := strings.TrimPrefix(synced, "synced "); got != strconv.Itoa(want) {
		b.Fatalf("typedinformer cached %s Deployments, want %d", got, want)
	}
	time.Sleep(settle)
	return p.memory(b)
}

// runSynced runs inf until stop is closed and returns it once synced.
func runSynced(b *testing.B, inf cache.SharedIndexInformer, stop chan struct{}) cache.SharedIndexInformer {
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		b.Fatal("informer did not sync")
	}
	return inf
}

// heapInuse collects garbage and returns the bytes in in-use heap spans.
// Two cycles, because objects with finalizers (connections, timers) are
// freed only by the second.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// writeHeapProfile writes the heap profile, with the cache still live, to
// $BINDKIT_BENCH_HEAPPROFILE/heap-<name>.prof when that variable names a
// directory: `go tool pprof -sample_index=inuse_space` then shows what
// holds the heap.
func writeHeapProfile(b *testing.B, name string) {
	dir := os.Getenv("BINDKIT_BENCH_HEAPPROFILE")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, "heap-"+name+".prof"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatalf("write heap profile: %v", err)
	}
}

// dropManagedFields is a cache.TransformFunc that clears
// metadata.managedFields of any object with metadata.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
