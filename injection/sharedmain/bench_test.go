package sharedmain

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/fixtures"
)

// BenchmarkPatchBurstWithRealAPIServer sends the writes of a large
// rebinding, n PATCHes of a realistic Deployment's pod template 8 at a
// time (psbinding's patch concurrency), through
// a client built as the process builds its clients, once with the default
// limits and once with client-side throttling off. Equal times show that
// the defaults leave such a burst alone. n=10000 runs only with
// BINDKIT_BENCH_LARGE=1.
//
//	flock /tmp/bindkit-controlplane.lock go test -run '^$' -bench PatchBurst -benchtime 3x ./injection/sharedmain/
func BenchmarkPatchBurstWithRealAPIServer(b *testing.B) {
	env := controlPlane.Env(b)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	sizes := []int{1000}
	if os.Getenv("BINDKIT_BENCH_LARGE") == "1" {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		ns := createNamespace(b, admin, "burst-")
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("web-%05d", i)
		}
		if err := parallel(names, 16, func(name string) error {
			_, err := admin.AppsV1().Deployments(ns).Create(b.Context(), fixtures.RealisticDeployment(ns, name), metav1.CreateOptions{})
			return err
		}); err != nil {
			b.Fatalf("create %d Deployments: %v", n, err)
		}
		for _, limits := range []struct {
			name  string
			flags Flags
		}{
			{"default", Flags{}},
			{"off", Flags{KubeAPIQPS: -1}},
		} {
			b.Run(fmt.Sprintf("n=%d/limits=%s", n, limits.name), func(b *testing.B) {
				f := limits.flags
				f.Kubeconfig = env.KubeconfigPath
				round := 0
				for b.Loop() {
					// A new client per round starts with a full bucket, as
					// a process does.
					cfg, err := restConfig(f)
					if err != nil {
						b.Fatal(err)
					}
					client := kubernetes.NewForConfigOrDie(cfg)
					round++
					patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"bindkit.dev/round":"%d-%s"}}}}}`, round, limits.name)
					if err := parallel(names, 8, func(name string) error {
						_, err := client.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
						return err
					}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "patches/s")
			})
		}
	}
}

// parallel calls do for every name, at most workers at a time, and returns
// the first error.
func parallel(names []string, workers int, do func(name string) error) error {
	work := make(chan string)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Go(func() {
			for name := range work {
				if err := do(name); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	return first
}
