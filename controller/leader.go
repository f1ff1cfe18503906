package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/bindkit/bindkit/controller/logging"
)

// LeaderAware is implemented by a Reconciler that writes only while its
// replica holds the leader lease.
//
// Every replica runs every Impl's workers, so read-only state a reconciler
// builds (an admission index, a cache) is warm on all of them; only the
// writes are reserved to the leader. Such a reconciler checks its own
// leadership (LeaderAwareFuncs.IsLeader) before writing and skips the
// writes while it is a follower. The Impl makes that safe:
//
//   - Leadership bounds writes. Demote cancels the context of every
//     reconcile in flight (context.Cause is ErrDemoted) before it calls the
//     reconciler's Demote, and no reconcile starts until that returns. A
//     reconciler whose writes use the context it was given therefore sends
//     no request once demoted; it should return when a write fails.
//   - No key is lost to a follower. The Impl remembers the key of every
//     reconcile that started while the Impl was not leader, and of every
//     reconcile Demote cut short, and enqueues them all right after the
//     reconciler's Promote. So a reconciler that skipped its writes as a
//     follower (or was stopped half-way) reconciles the key again once it
//     leads, even without a PromoteFunc. The memory is a set of keys,
//     emptied at each promotion: it grows with the number of distinct keys
//     seen as a follower (keys of objects deleted meanwhile included), not
//     with time.
//
// Promote is called when the replica becomes leader, before the remembered
// keys are enqueued. enqueue queues a key on the reconciler's Impl: Promote
// may list the objects the reconciler owns and enqueue each, for objects no
// reconcile has seen yet (enqueuing a key twice reconciles it once if it is
// still queued). Demote is called when the lease is lost or given up. Calls
// alternate, starting with Promote, and never overlap. Both must return
// quickly and must not wait for a reconcile: they run on the elector's
// goroutine, and Demote holds back the start of every reconcile while it
// runs.
type LeaderAware interface {
	Promote(enqueue func(key string))
	Demote()
}

// LeaderAwareFuncs implements LeaderAware for embedding in a reconciler
// struct used by pointer. Promote turns IsLeader true before it calls
// PromoteFunc, so reconciles started by PromoteFunc's enqueues already see
// themselves leader; Demote turns it false before it calls DemoteFunc. Its
// zero value is a follower that does nothing on Promote or Demote. It must
// not be copied after first use.
type LeaderAwareFuncs struct {
	// PromoteFunc, if set, runs on promotion after IsLeader turns true.
	PromoteFunc func(enqueue func(key string))
	// DemoteFunc, if set, runs on demotion after IsLeader turns false.
	DemoteFunc func()

	leader atomic.Bool
}

// Promote marks the reconciler leader and calls PromoteFunc.
func (l *LeaderAwareFuncs) Promote(enqueue func(key string)) {
	l.leader.Store(true)
	if l.PromoteFunc != nil {
		l.PromoteFunc(enqueue)
	}
}

// Demote marks the reconciler a follower and calls DemoteFunc.
func (l *LeaderAwareFuncs) Demote() {
	l.leader.Store(false)
	if l.DemoteFunc != nil {
		l.DemoteFunc()
	}
}

// IsLeader reports whether the reconciler was promoted and not demoted
// since. It is safe to call from any goroutine.
func (l *LeaderAwareFuncs) IsLeader() bool { return l.leader.Load() }

// Promote makes the Impl leader. When the reconciler is LeaderAware, its
// Promote is called with EnqueueKey, then IsLeader turns true and the keys
// the Impl remembered as a follower are enqueued (see LeaderAware). It does
// nothing when the Impl is already leader. RunLeaderElected calls it; call
// it yourself to run a single replica without leader election.
func (i *Impl) Promote() {
	i.leaderMu.Lock()
	defer i.leaderMu.Unlock()
	if i.leader.Load() {
		return
	}
	// The reconciler leads first: a reconcile that starts before the Impl
	// turns leader below is still remembered, and so reconciled again.
	if i.aware != nil {
		i.aware.Promote(i.EnqueueKey)
	}
	i.termMu.Lock()
	i.leader.Store(true)
	missed := i.missed
	i.missed = nil
	i.termMu.Unlock()

	keys := slices.Sorted(maps.Keys(missed))
	i.logger.Info("promoted to leader", zap.Int("keysSeenAsFollower", len(keys)))
	for _, key := range keys {
		i.EnqueueKey(key)
	}
}

// Demote makes the Impl a follower: the context of every reconcile in
// flight is cancelled with cause ErrDemoted, IsLeader turns false and, when
// the reconciler is LeaderAware, its Demote is called; no reconcile starts
// until then. Demote does not wait for the cancelled reconciles to return.
// It does nothing when the Impl is not leader.
func (i *Impl) Demote() {
	i.leaderMu.Lock()
	defer i.leaderMu.Unlock()
	if !i.leader.Load() {
		return
	}
	i.termMu.Lock()
	i.leader.Store(false)
	for run := range i.inflight {
		run.cancel(ErrDemoted)
	}
	if i.aware != nil {
		i.aware.Demote()
	}
	i.termMu.Unlock()
	i.logger.Info("demoted to follower")
}

// IsLeader reports whether the Impl is leader (see Promote).
func (i *Impl) IsLeader() bool { return i.leader.Load() }

// reconcileRun is one reconcile in flight.
type reconcileRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// begin is called as a reconcile of key starts. It returns the reconcile's
// context, derived from ctx, which Demote cancels while the reconcile runs,
// and remembers key for the next promotion when a LeaderAware reconciler
// runs as a follower. Call end when the reconcile returns.
func (i *Impl) begin(ctx context.Context, key string) *reconcileRun {
	run := &reconcileRun{}
	run.ctx, run.cancel = context.WithCancelCause(ctx)
	i.termMu.Lock()
	defer i.termMu.Unlock()
	if i.inflight == nil {
		i.inflight = map[*reconcileRun]struct{}{}
	}
	i.inflight[run] = struct{}{}
	if i.aware != nil && !i.leader.Load() {
		i.rememberLocked(key)
	}
	return run
}

// end forgets run, releases its context and reports whether a demotion
// cancelled it.
func (i *Impl) end(run *reconcileRun) (demoted bool) {
	i.termMu.Lock()
	delete(i.inflight, run)
	i.termMu.Unlock()
	demoted = errors.Is(context.Cause(run.ctx), ErrDemoted)
	run.cancel(nil)
	return demoted
}

// keepForPromotion makes sure a key that a demotion cut short is reconciled
// again by a leader: remembered while the Impl follows, enqueued at once if
// it leads again already.
func (i *Impl) keepForPromotion(key string) {
	i.termMu.Lock()
	leader := i.leader.Load()
	if !leader {
		i.rememberLocked(key)
	}
	i.termMu.Unlock()
	if leader {
		i.EnqueueKey(key)
	}
}

func (i *Impl) rememberLocked(key string) {
	if i.missed == nil {
		i.missed = map[string]struct{}{}
	}
	i.missed[key] = struct{}{}
}

// Defaults for LeaderElectionConfig's durations, the values Kubernetes'
// own controllers use.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// LeaderElectionConfig names the coordination.k8s.io/v1 Lease the replicas
// compete for and how they compete.
type LeaderElectionConfig struct {
	// Namespace and Name of the Lease; both required. The Lease is created
	// on first use.
	Namespace, Name string
	// Identity of this replica, unique among replicas (e.g. the pod name);
	// required.
	Identity string
	// LeaseDuration is how long followers wait after the last renewal
	// before taking the lease over (default DefaultLeaseDuration).
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// it gives up leadership (default DefaultRenewDeadline); it must be
	// shorter than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts to acquire or renew
	// (default DefaultRetryPeriod); RenewDeadline must exceed it by more
	// than a fifth.
	RetryPeriod time.Duration
}

func (c LeaderElectionConfig) withDefaults() LeaderElectionConfig {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	return c
}

// RunLeaderElected campaigns for the Lease named by cfg until ctx ends and
// moves impls between leader and follower as the lease comes and goes: all
// of them are promoted (Impl.Promote) when this replica acquires the lease
// and demoted when it loses it, after which the replica campaigns again.
//
// It does not run the impls' workers: run each Impl with Run alongside, so
// followers keep their read-only state warm. When ctx ends, the lease is
// released, so another replica takes over without waiting for it to expire,
// the impls are demoted and RunLeaderElected returns nil. It returns an
// error at once when cfg is incomplete or its durations are inconsistent.
//
// Progress is logged to the logger in ctx (logging.FromContext).
func RunLeaderElected(ctx context.Context, kube kubernetes.Interface, cfg LeaderElectionConfig, impls ...*Impl) error {
	cfg = cfg.withDefaults()
	lease := cfg.Namespace + "/" + cfg.Name
	var missing []error
	if cfg.Namespace == "" {
		missing = append(missing, errors.New("namespace is required"))
	}
	if cfg.Name == "" {
		missing = append(missing, errors.New("name is required"))
	}
	if cfg.Identity == "" {
		missing = append(missing, errors.New("identity is required"))
	}
	if err := errors.Join(missing...); err != nil {
		return fmt.Errorf("leader election lease %s: %w", lease, err)
	}
	logger := logging.FromContext(ctx).With(zap.String("lease", lease), zap.String("identity", cfg.Identity))

	c := &campaign{impls: impls, logger: logger}
	newElector := func() (*leaderelection.LeaderElector, error) {
		return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
				Client:     kube.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
			},
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            lease,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: c.started,
				OnStoppedLeading: c.stopped,
			},
		})
	}
	// Validate once up front so a bad config fails fast instead of looping.
	elector, err := newElector()
	if err != nil {
		return fmt.Errorf("leader election lease %s: %w", lease, err)
	}
	defer c.close()
	// Demote as soon as ctx ends, before the elector releases the lease,
	// so this replica stops writing before another one may start.
	defer context.AfterFunc(ctx, c.stopped)()
	for {
		logger.Info("campaigning for leadership")
		elector.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		// A fresh elector forgets the record observed under the lost term.
		if elector, err = newElector(); err != nil {
			return fmt.Errorf("leader election lease %s: %w", lease, err)
		}
	}
}

// campaign turns the elector's callbacks into Promote and Demote calls.
//
// client-go starts OnStartedLeading on a goroutine of its own and may call
// OnStoppedLeading before that goroutine runs; it cancels the term's context
// first. So started checks that context under mu, and close stops late
// starters from touching the impls once RunLeaderElected returns.
type campaign struct {
	impls  []*Impl
	logger *zap.Logger

	mu      sync.Mutex
	leading bool
	closed  bool
}

func (c *campaign) started(term context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || term.Err() != nil || c.leading {
		return
	}
	c.leading = true
	c.logger.Info("became leader")
	for _, impl := range c.impls {
		impl.Promote()
	}
}

func (c *campaign) stopped() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.leading {
		return
	}
	c.leading = false
	c.logger.Info("stopped leading")
	for _, impl := range c.impls {
		impl.Demote()
	}
}

func (c *campaign) close() {
	c.stopped()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}
