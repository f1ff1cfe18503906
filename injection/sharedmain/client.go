package sharedmain

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/injection"
)

// Client-side rate limits of the API clients the process builds
// (--kube-api-qps, --kube-api-burst). Each client has its own token bucket:
// the kube clientset, the dynamic client (which patches subjects and writes
// Bindings' status) and the leader election's clientset.
//
// Why these values. A kube-apiserver since v1.29 runs API Priority and
// Fairness: it queues, shares out and, when it must, rejects requests per
// priority level, so protecting the server from a busy client is its job,
// not the client's. client-go's own defaults (5 a second, burst 10) predate
// it and made 500 subjects bind at exactly 5 a second. What a client limit
// still does well is act as a fuse: a controller stuck in a loop that
// succeeds (write, event, reconcile, write) over many objects is held to a
// rate the server absorbs rather than whatever the server will take. So
// the limits sit above the largest legitimate burst and below a runaway's
// rate:
//
//   - The largest legitimate burst is binding every subject of a selector
//     Binding at once, one PATCH per subject with
//     psbinding.DefaultPatchConcurrency (8) in flight. Against a
//     kube-apiserver on two cores that runs at 285 to 500 realistic
//     Deployments a second (BenchmarkPatchBurstWithRealAPIServer). A burst
//     of 2,000 lets a rebinding of 1,000 subjects, with a read for each,
//     through without a single wait, and 1,000 a second, twice the fastest
//     rate measured, leaves a rebinding of 10,000 subjects as fast as an
//     unthrottled client.
//   - A runaway loop is held to 1,000 requests a second per client: a
//     fraction of the writes one etcd sustains, instead of as many as the
//     server accepts.
//
// On an API server fast enough that one reconcile goes beyond 1,000
// patches a second, raise --kube-api-qps, or set it negative to rely on
// priority and fairness alone.
const (
	DefaultKubeAPIQPS   = 1000
	DefaultKubeAPIBurst = 2000
)

// DefaultResyncPeriod is how often, by default, informers replay every
// object to the controllers (--resync-period): the last resort that heals a
// missed event or a key given up on, as knative's controllers do, and long
// enough that the replay's reconciles (which write nothing for objects
// already in order) cost nothing noticeable.
const DefaultResyncPeriod = 10 * time.Hour

// applyClientFlags sets the rate limits of f on cfg.
func applyClientFlags(cfg *rest.Config, f Flags) {
	cfg.QPS = float32(f.KubeAPIQPS)
	cfg.Burst = f.KubeAPIBurst
}

// injectionOptions are the options the process builds its informers with.
func injectionOptions(f Flags) injection.Options {
	return injection.Options{ResyncPeriod: max(f.ResyncPeriod, 0)}
}

// electionClient returns the clientset leader election renews the Lease
// with: its own, so the renewals never wait behind the controllers' writes
// in a shared token bucket (a leader that cannot renew within the renew
// deadline loses its lease, and with it every write in flight). A process
// built on clients without a rest.Config (a test's fakes) shares kube.
func electionClient(ctx context.Context, kube kubernetes.Interface) (kubernetes.Interface, error) {
	cfg, ok := injection.TryConfig(ctx)
	if !ok {
		return kube, nil
	}
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("leader election client for %s: %w", cfg.Host, err)
	}
	return client, nil
}
