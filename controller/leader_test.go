package controller_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/bindkit/bindkit/controller"
)

// leaderReconciler writes (records a write) only while leader and
// enqueues the keys it owns on promotion.
type leaderReconciler struct {
	controller.LeaderAwareFuncs

	// write, if set, makes a leader's write real; it runs under mu.
	write func(ctx context.Context, key string) error

	mu       sync.Mutex
	owned    []string
	writes   []string
	skips    []string
	promoted int
	demoted  int
}

func newLeaderReconciler(owned ...string) *leaderReconciler {
	r := &leaderReconciler{owned: owned}
	r.PromoteFunc = func(enqueue func(string)) {
		r.mu.Lock()
		r.promoted++
		keys := append([]string(nil), r.owned...)
		r.mu.Unlock()
		for _, key := range keys {
			enqueue(key)
		}
	}
	r.DemoteFunc = func() {
		r.mu.Lock()
		r.demoted++
		r.mu.Unlock()
	}
	return r
}

func (r *leaderReconciler) Reconcile(ctx context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.IsLeader() {
		if r.write != nil {
			if err := r.write(ctx, key); err != nil {
				return err
			}
		}
		r.writes = append(r.writes, key)
	} else {
		r.skips = append(r.skips, key)
	}
	return nil
}

type leaderState struct {
	Writes, Skips     []string
	Promoted, Demoted int
}

func (r *leaderReconciler) state() leaderState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return leaderState{
		Writes:   append([]string(nil), r.writes...),
		Skips:    append([]string(nil), r.skips...),
		Promoted: r.promoted,
		Demoted:  r.demoted,
	}
}

var fastLease = controller.LeaderElectionConfig{
	LeaseDuration: 2 * time.Second,
	RenewDeadline: time.Second,
	RetryPeriod:   200 * time.Millisecond,
}

func leaseConfig(ns, name, identity string) controller.LeaderElectionConfig {
	cfg := fastLease
	cfg.Namespace, cfg.Name, cfg.Identity = ns, name, identity
	return cfg
}

// replica runs one Impl and its elector until stop is called.
type replica struct {
	impl   *controller.Impl
	r      *leaderReconciler
	cancel context.CancelFunc
	done   chan struct{}
	runErr error
	elErr  error
	once   sync.Once
}

func startReplica(t *testing.T, kube kubernetes.Interface, cfg controller.LeaderElectionConfig, owned ...string) *replica {
	t.Helper()
	return startReplicaOf(t, kube, cfg, newLeaderReconciler(owned...))
}

func startReplicaOf(t *testing.T, kube kubernetes.Interface, cfg controller.LeaderElectionConfig, r *leaderReconciler) *replica {
	t.Helper()
	impl := controller.NewImpl(r, nil, "leader-"+cfg.Identity)
	ctx, cancel := context.WithCancel(context.Background())
	rep := &replica{impl: impl, r: r, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { rep.runErr = impl.Run(ctx, 1) })
	wg.Go(func() { rep.elErr = controller.RunLeaderElected(ctx, kube, cfg, impl) })
	go func() { wg.Wait(); close(rep.done) }()
	t.Cleanup(func() { rep.stop(t) })
	return rep
}

// stop cancels the replica and waits for Run and RunLeaderElected to
// return; it is safe to call twice.
func (rep *replica) stop(t *testing.T) {
	t.Helper()
	rep.once.Do(func() {
		rep.cancel()
		<-rep.done
		if rep.runErr != nil {
			t.Errorf("Run: %v", rep.runErr)
		}
		if rep.elErr != nil {
			t.Errorf("RunLeaderElected: %v", rep.elErr)
		}
	})
}

func TestRunLeaderElectedWithFakeClientset(t *testing.T) {
	kube := fake.NewClientset()
	rep := startReplica(t, kube, leaseConfig("kube-system", "bindkit", "replica-a"), "ns/owned")
	eventually(t, "promotion and the owned key's write", func() bool {
		return len(rep.r.state().Writes) == 1
	})
	if !rep.impl.IsLeader() {
		t.Error("Impl.IsLeader = false after promotion")
	}
	lease, err := kube.CoordinationV1().Leases("kube-system").Get(t.Context(), "bindkit", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease: %v", err)
	}
	if got := *lease.Spec.HolderIdentity; got != "replica-a" {
		t.Errorf("Lease holder = %q, want replica-a", got)
	}

	rep.stop(t)
	want := leaderState{Writes: []string{"ns/owned"}, Promoted: 1, Demoted: 1}
	if diff := cmp.Diff(want, rep.r.state()); diff != "" {
		t.Errorf("reconciler state after stop (-want +got):\n%s", diff)
	}
	if rep.impl.IsLeader() || rep.r.IsLeader() {
		t.Error("still leader after RunLeaderElected returned")
	}
	lease, err = kube.CoordinationV1().Leases("kube-system").Get(t.Context(), "bindkit", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease: %v", err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("Lease holder after stop = %q, want it released", *lease.Spec.HolderIdentity)
	}
}

// TestRunLeaderElectedCampaignsAgainAfterLosingTheLease makes the API
// server refuse Lease updates for a while: the replica is demoted when it
// cannot renew, campaigns again and is promoted once updates succeed.
func TestRunLeaderElectedCampaignsAgainAfterLosingTheLease(t *testing.T) {
	kube := fake.NewClientset()
	var refuse atomic.Bool
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewServiceUnavailable("refused by test")
		}
		return false, nil, nil
	})
	rep := startReplica(t, kube, leaseConfig("kube-system", "bindkit", "replica-a"), "ns/owned")
	eventually(t, "first promotion", func() bool { return rep.r.state().Promoted == 1 })

	refuse.Store(true)
	eventually(t, "demotion", func() bool { return rep.r.state().Demoted == 1 })
	if rep.impl.IsLeader() {
		t.Error("Impl.IsLeader = true after losing the lease")
	}
	refuse.Store(false)
	// Stopping drops queued keys, so wait for the write the second
	// promotion enqueued, not just for the promotion.
	eventually(t, "second promotion and its write", func() bool {
		s := rep.r.state()
		return s.Promoted == 2 && len(s.Writes) == 2
	})
	rep.stop(t)
	want := leaderState{Writes: []string{"ns/owned", "ns/owned"}, Promoted: 2, Demoted: 2}
	if diff := cmp.Diff(want, rep.r.state()); diff != "" {
		t.Errorf("reconciler state (-want +got):\n%s", diff)
	}
}

func TestRunLeaderElectedRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  controller.LeaderElectionConfig
	}{
		{"no namespace", controller.LeaderElectionConfig{Name: "l", Identity: "a"}},
		{"no name", controller.LeaderElectionConfig{Namespace: "ns", Identity: "a"}},
		{"no identity", controller.LeaderElectionConfig{Namespace: "ns", Name: "l"}},
		{"renew deadline not below lease duration", controller.LeaderElectionConfig{
			Namespace: "ns", Name: "l", Identity: "a", LeaseDuration: time.Second, RenewDeadline: time.Second,
		}},
		{"retry period too close to renew deadline", controller.LeaderElectionConfig{
			Namespace: "ns", Name: "l", Identity: "a", LeaseDuration: 3 * time.Second, RenewDeadline: time.Second, RetryPeriod: time.Second,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bad config must fail at once, not campaign: the context
			// never ends, so a hang fails the test by timeout.
			if err := controller.RunLeaderElected(context.Background(), fake.NewClientset(), tt.cfg); err == nil {
				t.Error("RunLeaderElected = nil, want an error")
			}
		})
	}
}

func TestImplPromoteDemoteWithoutElection(t *testing.T) {
	r := newLeaderReconciler("ns/owned")
	impl := controller.NewImpl(r, nil, "single")
	impl.Promote()
	impl.Promote() // idempotent
	if !r.IsLeader() || !impl.IsLeader() {
		t.Fatal("not leader after Promote")
	}
	if diff := cmp.Diff(map[string]time.Duration{"ns/owned": 0}, impl.PendingKeys()); diff != "" {
		t.Errorf("keys enqueued by Promote (-want +got):\n%s", diff)
	}
	impl.Demote()
	impl.Demote() // idempotent
	if r.IsLeader() || impl.IsLeader() {
		t.Fatal("leader after Demote")
	}
	if diff := cmp.Diff(leaderState{Promoted: 1, Demoted: 1}, r.state()); diff != "" {
		t.Errorf("reconciler state (-want +got):\n%s", diff)
	}
}
