package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
)

// memorySubjects is how many Deployments the informers hold.
const memorySubjects = 10000

// memoryEnv gates BenchmarkInformerHeap10000: creating 10,000 Deployments
// takes a minute or more, too long for every `-bench .`.
const memoryEnv = "BINDKIT_BENCH_MEMORY"

// BenchmarkInformerHeap10000 compares the heap a process needs to hold an
// informer over 10,000 realistic Deployments (issue 7 part 4):
// impl=withpod is the duck.TypedInformerFactory informer over the dynamic
// client, holding *duck.WithPod, which is what a Binding controller such as
// githubbinding keeps for its subjects; impl=deployment is client-go's
// typed informer holding full *appsv1.Deployment objects. Each iteration
// builds one informer, waits for its cache to sync, collects garbage and
// reports the growth of runtime.MemStats.HeapInuse (heap-MB, and
// heap-B/object) while the informer is still running; the informer is then
// stopped and dropped. sec/op is the time to list and sync.
//
// Run it with
//
//	BINDKIT_BENCH_MEMORY=1 go test -run '^$' -bench InformerHeap10000 -benchtime 1x -count 3 ./
func BenchmarkInformerHeap10000(b *testing.B) {
	if os.Getenv(memoryEnv) != "1" {
		b.Skipf("set %s=1 to create %d Deployments and measure informer heaps", memoryEnv, memorySubjects)
	}
	env := startControlPlane(b)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(b, "memory-")
	start := time.Now()
	if _, err := createDeployments(context.Background(), kube, ns, memorySubjects, 16, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d Deployments in %s", memorySubjects, time.Since(start).Round(time.Second))
	deploymentsGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

	cases := []struct {
		name string
		// build returns an unstarted informer; everything it allocates
		// beyond the informer itself is garbage once it returns.
		build func(b *testing.B) cache.SharedIndexInformer
	}{
		{"withpod", func(b *testing.B) cache.SharedIndexInformer {
			inf, _, err := (&duck.TypedInformerFactory{Client: dyn}).Get(context.Background(), deploymentsGVR)
			if err != nil {
				b.Fatal(err)
			}
			return inf
		}},
		{"deployment", func(*testing.B) cache.SharedIndexInformer {
			return informers.NewSharedInformerFactory(kube, 0).Apps().V1().Deployments().Informer()
		}},
		// Diagnostics, not the comparison: the same two informers
		// with a transform that drops metadata.managedFields before the
		// object enters the cache (nothing in a Binding controller reads
		// them), to show how much of each heap they are.
		{"withpod-no-managedfields", func(b *testing.B) cache.SharedIndexInformer {
			inf, _, err := (&duck.TypedInformerFactory{Client: dyn}).Get(context.Background(), deploymentsGVR)
			if err != nil {
				b.Fatal(err)
			}
			if err := inf.SetTransform(dropManagedFields); err != nil {
				b.Fatal(err)
			}
			return inf
		}},
		{"deployment-no-managedfields", func(b *testing.B) cache.SharedIndexInformer {
			inf := informers.NewSharedInformerFactory(kube, 0).Apps().V1().Deployments().Informer()
			if err := inf.SetTransform(dropManagedFields); err != nil {
				b.Fatal(err)
			}
			return inf
		}},
	}
	for _, c := range cases {
		b.Run("impl="+c.name, func(b *testing.B) {
			var grown uint64
			for range b.N {
				b.StopTimer()
				before := heapInuse()
				b.StartTimer()

				inf := c.build(b)
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() { defer close(done); inf.Run(stop) }()
				if !cache.WaitForCacheSync(stop, inf.HasSynced) {
					b.Fatal("informer did not sync")
				}

				b.StopTimer()
				after := heapInuse()
				writeHeapProfile(b, c.name)
				if n := len(inf.GetStore().ListKeys()); n != memorySubjects {
					b.Fatalf("informer holds %d objects, want %d", n, memorySubjects)
				}
				close(stop)
				<-done
				grown = after - min(before, after)
				b.StartTimer()
			}
			b.ReportMetric(float64(grown)/(1<<20), "heap-MB")
			b.ReportMetric(float64(grown)/memorySubjects, "heap-B/object")
		})
	}
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

// writeHeapProfile writes the heap profile, with the informer still live,
// to $BINDKIT_BENCH_HEAPPROFILE/heap-<name>.prof when that variable names a
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
