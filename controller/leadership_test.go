package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/controller"
)

// skipper is a reconciler wired the way knative's walkthrough wires a
// BaseReconciler: LeaderAwareFuncs embedded, no PromoteFunc, and a
// Reconcile that returns nil without writing while it is a follower.
type skipper struct {
	controller.LeaderAwareFuncs

	onSkip func() // called, if set, after each skip

	mu     sync.Mutex
	writes map[string]int
	skips  map[string]int
}

func newSkipper() *skipper { return &skipper{writes: map[string]int{}, skips: map[string]int{}} }

func (s *skipper) Reconcile(_ context.Context, key string) error {
	s.mu.Lock()
	if !s.IsLeader() {
		s.skips[key]++
		s.mu.Unlock()
		if s.onSkip != nil {
			s.onSkip()
		}
		return nil
	}
	s.writes[key]++
	s.mu.Unlock()
	return nil
}

func (s *skipper) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for k := range s.writes {
			if !yield(k) {
				return
			}
		}
	})
}

func (s *skipper) skipped(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skips[key] > 0
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns/b-%03d", i)
	}
	return out
}

// TestKeysSeenAsFollowerAreReconciledOnPromotion: a LeaderAware reconciler
// without a PromoteFunc skips every key as a follower; once promoted, the
// Impl enqueues each of them again, so each is written.
func TestKeysSeenAsFollowerAreReconciledOnPromotion(t *testing.T) {
	tests := []struct {
		name    string
		promote func(enqueue func(string)) // the reconciler's PromoteFunc
		want    []string
	}{{
		name: "no PromoteFunc",
		want: []string{"ns/a", "ns/b", "ns/c"},
	}, {
		name:    "a PromoteFunc that enqueues more",
		promote: func(enqueue func(string)) { enqueue("ns/owned") },
		want:    []string{"ns/a", "ns/b", "ns/c", "ns/owned"},
	}, {
		name:    "a PromoteFunc that enqueues the same keys",
		promote: func(enqueue func(string)) { enqueue("ns/a"); enqueue("ns/b") },
		want:    []string{"ns/a", "ns/b", "ns/c"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSkipper()
			r.PromoteFunc = tt.promote
			impl := controller.NewImpl(r, nil, "follower")
			for _, key := range []string{"ns/a", "ns/b", "ns/c"} {
				impl.EnqueueKey(key)
			}
			stop := run(t, impl, 2)
			eventually(t, "every key skipped as a follower", func() bool {
				return r.skipped("ns/a") && r.skipped("ns/b") && r.skipped("ns/c")
			})
			if got := r.written(); len(got) != 0 {
				t.Fatalf("follower wrote %v", got)
			}
			impl.Promote()
			eventually(t, "writes after promotion", func() bool { return len(r.written()) == len(tt.want) })
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, r.written()); diff != "" {
				t.Errorf("keys written once leader (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPromotionDuringTheFirstReconcilesLosesNoKey is the start-up race of
// a replica: keys from the informers' first list are queued before Run,
// and the promotion (from another goroutine, as the elector's, or right
// after Run under --disable-ha) lands while the workers are taking them.
// Every key must end up written, whichever side of the promotion its
// reconcile fell on.
func TestPromotionDuringTheFirstReconcilesLosesNoKey(t *testing.T) {
	all := keys(300)
	for _, after := range []int{0, 1, 150, 299, 300} {
		for attempt := range 5 {
			t.Run(fmt.Sprintf("after %d skips/%d", after, attempt), func(t *testing.T) {
				r := newSkipper()
				impl := controller.NewImpl(r, nil, "race")
				var skipped atomic.Int64
				r.onSkip = func() {
					if skipped.Add(1) == int64(after) {
						go impl.Promote()
					}
				}
				for _, key := range all {
					impl.EnqueueKey(key)
				}
				stop := run(t, impl, 2)
				if after == 0 {
					impl.Promote()
				}
				eventually(t, "every key written", func() bool { return len(r.written()) == len(all) })
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
			})
		}
	}
}

// TestFollowerMemoryIsASet: however often keys are reconciled as a
// follower, promotion enqueues each once, and the memory is empty after.
func TestFollowerMemoryIsASet(t *testing.T) {
	r := newSkipper()
	impl := controller.NewImpl(r, nil, "set")
	stop := run(t, impl, 1)
	for round := range 5 {
		for _, key := range keys(10) {
			impl.EnqueueKey(key)
		}
		eventually(t, fmt.Sprintf("round %d skipped", round), func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.skips["ns/b-009"] == round+1
		})
	}
	impl.Promote()
	eventually(t, "each key written", func() bool { return len(r.written()) == 10 })
	// A second promotion (after a demotion with no reconcile in between)
	// finds nothing to replay.
	impl.Demote()
	impl.Promote()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, n := range r.writes {
		if n != 1 {
			t.Errorf("%s written %d times, want once", key, n)
		}
	}
}

// TestNotLeaderAwareKeysAreNotRemembered: a reconciler that is not
// LeaderAware declared it works the same as a follower, so promotion
// replays nothing.
func TestNotLeaderAwareKeysAreNotRemembered(t *testing.T) {
	var c calls
	impl := controller.NewImpl(controller.ReconcilerFunc(func(_ context.Context, key string) error {
		c.add(key)
		return nil
	}), nil, "plain")
	impl.EnqueueKey("ns/a")
	stop := run(t, impl, 1)
	eventually(t, "reconciled", func() bool { return c.count("ns/a") == 1 })
	impl.Promote()
	impl.EnqueueKey("ns/marker")
	eventually(t, "marker reconciled", func() bool { return c.count("ns/marker") == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff([]string{"ns/a", "ns/marker"}, c.get()); diff != "" {
		t.Errorf("reconciles (-want +got):\n%s", diff)
	}
}

// blocker is a LeaderAware reconciler whose reconcile of "ns/block" waits
// for its context to end, and records what it saw.
type blocker struct {
	controller.LeaderAwareFuncs

	started            chan struct{}
	mu                 sync.Mutex
	causes             []error // context.Cause when each blocked reconcile ended
	demoteSawCancelled bool
	calls              int
}

func (b *blocker) Reconcile(ctx context.Context, key string) error {
	b.mu.Lock()
	b.calls++
	first := b.calls == 1
	b.mu.Unlock()
	if !first || !b.IsLeader() {
		return nil
	}
	close(b.started)
	<-ctx.Done()
	b.mu.Lock()
	b.causes = append(b.causes, context.Cause(ctx))
	b.mu.Unlock()
	return fmt.Errorf("write: %w", ctx.Err())
}

// TestDemoteCancelsReconcilesInFlight: a reconcile in flight when the Impl
// is demoted has its context cancelled with cause ErrDemoted before the
// reconciler's own Demote runs; the key is not retried as a failure but
// reconciled again at the next promotion.
func TestDemoteCancelsReconcilesInFlight(t *testing.T) {
	b := &blocker{started: make(chan struct{})}
	var inflight context.Context
	b.DemoteFunc = func() {
		// By now the reconcile's context must be cancelled.
		b.demoteSawCancelled = inflight != nil && inflight.Err() != nil
	}
	logger, logs := observed()
	impl := controller.NewImpl(&ctxRecorder{blocker: b, ctx: &inflight}, logger, "demote")
	impl.Promote()
	impl.EnqueueKey("ns/block")
	stop := run(t, impl, 1)
	<-b.started
	impl.Demote()
	eventually(t, "reconcile cut short", hasMessage(logs, "reconcile cut short by demotion; the next promotion reconciles the key again"))
	b.mu.Lock()
	causes := append([]error(nil), b.causes...)
	sawCancelled := b.demoteSawCancelled
	b.mu.Unlock()
	if len(causes) != 1 || !errors.Is(causes[0], controller.ErrDemoted) {
		t.Errorf("context causes = %v, want [ErrDemoted]", causes)
	}
	if !sawCancelled {
		t.Error("the reconciler's Demote ran before the in-flight context was cancelled")
	}
	if n := logs.FilterMessage("reconcile failed; will retry").Len(); n != 0 {
		t.Errorf("demoted reconcile retried as a failure %d times", n)
	}
	impl.Promote()
	eventually(t, "key reconciled again after promotion", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.calls == 2
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// ctxRecorder is a blocker that also publishes its reconcile's context.
type ctxRecorder struct {
	*blocker
	ctx *context.Context
}

func (c *ctxRecorder) Reconcile(ctx context.Context, key string) error {
	*c.ctx = ctx
	return c.blocker.Reconcile(ctx, key)
}

// TestReconcileOutlivingADemotionAndRepromotionIsEnqueuedAgain: the Impl
// is demoted and promoted again while one reconcile still runs; that key
// is queued again at once, since the promotion already went by.
func TestReconcileOutlivingADemotionAndRepromotionIsEnqueuedAgain(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	var c calls
	var once sync.Once
	r := &slowLeader{reconcile: func(ctx context.Context, key string) error {
		c.add(key)
		if c.count(key) == 1 {
			once.Do(func() { close(started) })
			<-release // ignores its context: a reconciler slow to notice
		}
		return nil
	}}
	impl := controller.NewImpl(r, nil, "flap")
	impl.Promote()
	impl.EnqueueKey("ns/slow")
	stop := run(t, impl, 1)
	<-started
	impl.Demote()
	impl.Promote()
	close(release)
	eventually(t, "second reconcile", func() bool { return c.count("ns/slow") == 2 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

type slowLeader struct {
	controller.LeaderAwareFuncs
	reconcile func(ctx context.Context, key string) error
}

func (s *slowLeader) Reconcile(ctx context.Context, key string) error { return s.reconcile(ctx, key) }
