package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/controller"
)

// sentRequest is one request a countingTransport let through.
type sentRequest struct {
	at   time.Time
	live bool // its context was not cancelled when it reached the transport
}

// countingTransport records every write request it is handed, with the
// time, before passing it on. A request whose context is already cancelled
// is recorded as not live: net/http refuses to send it.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	sent []sentRequest
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		c.mu.Lock()
		c.sent = append(c.sent, sentRequest{at: time.Now(), live: req.Context().Err() == nil})
		c.mu.Unlock()
	}
	return c.next.RoundTrip(req)
}

// split counts the live writes sent up to and after t, and the writes
// refused after t because their context had ended.
func (c *countingTransport) split(t time.Time) (before, after, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sent {
		switch {
		case !s.live:
			refused++
		case s.at.After(t):
			after++
		default:
			before++
		}
	}
	return before, after, refused
}

func (c *countingTransport) live() int {
	before, _, _ := c.split(time.Now().Add(time.Hour))
	return before
}

// patcher is a leader-only reconciler that, for any key, patches every
// ConfigMap of its namespace one after another, round after round, each
// write numbered. Its writes use the context it is given, as the
// Reconciler contract asks, and it returns at the first failed write.
type patcher struct {
	controller.LeaderAwareFuncs

	kube   kubernetes.Interface
	ns     string
	names  []string
	rounds int

	seq       atomic.Int64
	demotedAt atomic.Pointer[time.Time]
	result    chan patchResult // the first leader reconcile's outcome
}

type patchResult struct {
	at  time.Time
	err error
}

const writeAnnotation = "bindkit.dev/write"

func (p *patcher) Reconcile(ctx context.Context, _ string) error {
	if !p.IsLeader() {
		return nil
	}
	err := p.patchAll(ctx)
	select {
	case p.result <- patchResult{at: time.Now(), err: err}:
	default:
	}
	return err
}

func (p *patcher) patchAll(ctx context.Context) error {
	for range p.rounds {
		for _, name := range p.names {
			n := p.seq.Add(1)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, writeAnnotation, strconv.FormatInt(n, 10))
			if _, err := p.kube.CoreV1().ConfigMaps(p.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("configmap %s/%s: patch: %w", p.ns, name, err)
			}
		}
	}
	return nil
}

// TestDemotionStopsWritesWithRealAPIServer demotes a replica in the middle
// of a reconcile that patches hundreds of ConfigMaps in a real
// kube-apiserver, three ways: Impl.Demote called directly, the Lease taken
// over by another holder (RunLeaderElected fails to renew), and
// RunLeaderElected's context ending. In each, the reconcile's client sends
// no write after the demotion, the API server stores no write numbered
// after the last one sent, and the reconcile returns promptly.
func TestDemotionStopsWritesWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	tests := []struct {
		name string
		// lead makes impl leader and returns how to demote it.
		lead func(t *testing.T, impl *controller.Impl, ns string) (demote func())
	}{{
		name: "Impl.Demote",
		lead: func(t *testing.T, impl *controller.Impl, _ string) func() {
			impl.Promote()
			return impl.Demote
		},
	}, {
		name: "lease taken over by another holder",
		lead: func(t *testing.T, impl *controller.Impl, ns string) func() {
			elect(t, admin, leaseConfig(ns, "demotion", "replica-a"), impl)
			return func() { takeLease(t, admin, ns, "demotion", "replica-b") }
		},
	}, {
		name: "RunLeaderElected's context ends",
		lead: func(t *testing.T, impl *controller.Impl, ns string) func() {
			return elect(t, admin, leaseConfig(ns, "demotion", "replica-a"), impl)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.CreateNamespace(t, "demotion-")
			names := createConfigMaps(t, admin, ns, 300)

			counter := &countingTransport{}
			cfg := rest.CopyConfig(env.Config)
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				counter.next = rt
				return counter
			}
			p := &patcher{
				kube: kubernetes.NewForConfigOrDie(cfg), ns: ns, names: names,
				rounds: 20, result: make(chan patchResult, 1),
			}
			p.DemoteFunc = func() { now := time.Now(); p.demotedAt.Store(&now) }
			impl := controller.NewImpl(p, nil, "patcher")
			stop := run(t, impl, 1)
			demote := tt.lead(t, impl, ns)
			eventually(t, "leadership", impl.IsLeader)
			impl.EnqueueKey(ns + "/all")
			eventually(t, "50 writes", func() bool { return counter.live() >= 50 })
			demote()

			var res patchResult
			select {
			case res = <-p.result:
			case <-time.After(time.Minute):
				t.Fatal("the reconcile did not return within a minute of the demotion")
			}
			// Demote cancels the reconcile before it calls DemoteFunc (the
			// contract), so the reconcile may return first.
			eventually(t, "the reconciler's demotion", func() bool { return p.demotedAt.Load() != nil })
			demotedAt := p.demotedAt.Load()
			before, after, refused := counter.split(*demotedAt)
			returnedIn := res.at.Sub(*demotedAt)
			t.Logf("writes sent before demotion: %d, after: %d, refused for a cancelled context: %d; reconcile returned %s after demotion with %v",
				before, after, refused, returnedIn, res.err)

			if after != 0 {
				t.Errorf("%d writes sent after demotion, want 0", after)
			}
			if total := len(names) * p.rounds; before >= total {
				t.Errorf("all %d writes were sent before demotion: the test did not demote mid-reconcile", total)
			}
			if res.err == nil {
				t.Error("the demoted reconcile returned nil, want its failed write")
			}
			// A bound on a hang, not a speed target: an in-flight PATCH
			// takes milliseconds.
			if returnedIn > 5*time.Second {
				t.Errorf("the reconcile returned %s after demotion, want promptly", returnedIn)
			}
			if stored := maxStoredWrite(t, admin, ns); stored > int64(before) {
				t.Errorf("the API server stores write #%d, but only %d writes were sent before demotion", stored, before)
			}
			if err := stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// elect runs RunLeaderElected for impl until the returned function (also
// run at cleanup) cancels it and waits for it.
func elect(t *testing.T, kube kubernetes.Interface, cfg controller.LeaderElectionConfig, impl *controller.Impl) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- controller.RunLeaderElected(ctx, kube, cfg, impl) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("RunLeaderElected: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// takeLease makes holder the Lease's holder for an hour, as a replica that
// won it after this one's renewals failed would.
func takeLease(t *testing.T, kube kubernetes.Interface, ns, name, holder string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := kube.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec = coordinationv1.LeaseSpec{
			HolderIdentity:       new(holder),
			LeaseDurationSeconds: new(int32(3600)),
			AcquireTime:          &now,
			RenewTime:            &now,
			LeaseTransitions:     lease.Spec.LeaseTransitions,
		}
		_, err = kube.CoordinationV1().Leases(ns).Update(t.Context(), lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("take Lease %s/%s for %s: %v", ns, name, holder, err)
	}
}

func createConfigMaps(t *testing.T, kube kubernetes.Interface, ns string, n int) []string {
	t.Helper()
	names := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range names {
		names[i] = fmt.Sprintf("cm-%03d", i)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: names[i]},
			}, metav1.CreateOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("create ConfigMaps in %s: %v", ns, err)
		}
	}
	return names
}

// maxStoredWrite returns the highest write number stored on the
// namespace's ConfigMaps.
func maxStoredWrite(t *testing.T, kube kubernetes.Interface, ns string) int64 {
	t.Helper()
	list, err := kube.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ConfigMaps in %s: %v", ns, err)
	}
	var highest int64
	for _, cm := range list.Items {
		if v, ok := cm.Annotations[writeAnnotation]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("configmap %s/%s: annotation %s=%q: %v", ns, cm.Name, writeAnnotation, v, err)
			}
			highest = max(highest, n)
		}
	}
	return highest
}
