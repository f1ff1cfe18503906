package controller

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindkit/bindkit/controller/logging"
)

// Reconciler is the one method a controller author writes. Reconcile
// receives a key, "namespace/name" for a namespaced object or "name" for a
// cluster-scoped one (split it with cache.SplitMetaNamespaceKey), and brings
// the world in line with the object it names. It must be safe to call for
// different keys at once (Run's workers share it); Impl never reconciles the
// same key on two workers at the same time.
//
// The error decides what happens next: nil forgets the key; an error made
// by NewRequeueAfter reconciles again later without counting a failure; one
// made by NewPermanentError is logged and waits for a change to the object
// (the next event or resync enqueues it again); any other error is retried
// with per-key exponential backoff, capped (DefaultMaxBackoff) and without
// end unless ControllerOptions.MaxRetries says otherwise. An error that wraps both a
// permanent error and a requeue is treated as permanent. A panic is
// recovered, logged with its stack and retried like an error: reconcilers
// run Binding authors' code, and one bad object must not stop the process.
//
// ctx carries a logger (logging.FromContext) that names the controller,
// the key and a reconcile ID unique to this attempt. Every write Reconcile
// makes must use ctx (or a context derived from it), because ctx is how
// the Impl stops a reconcile:
//   - Demote cancels the ctx of every reconcile in flight, with
//     context.Cause(ctx) == ErrDemoted, so a replica that lost its lease
//     sends no request after Demote returns (a request already on the wire
//     may still land). Reconcile should return soon after; see LeaderAware
//     for what happens to the key.
//   - When Run's context ends, ctx stays live for the drain timeout so an
//     in-flight reconcile can finish its writes, then it is cancelled.
type Reconciler interface {
	Reconcile(ctx context.Context, key string) error
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, key string) error

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, key string) error { return f(ctx, key) }

// Defaults for NewImpl's options.
const (
	// DefaultBaseBackoff is the wait before the first retry of a failed
	// key; each further failure doubles it, up to the cap.
	DefaultBaseBackoff = 5 * time.Millisecond
	// DefaultMaxBackoff caps the wait between retries of a key that keeps
	// failing. A failed key is retried without end (a transient cause, such
	// as an API server restart, a missing RBAC rule or a webhook outage,
	// must not leave an object unreconciled once it is fixed), so the cap
	// is the longest an object waits after its cause is fixed: a minute is
	// what an operator watching a Binding expects, and costs one reconcile
	// a minute per failing key. From 5ms doubling, retries come at about
	// 5ms, 15ms, 35ms, ... 41s (the 14th, 82s after the first failure) and
	// then every minute.
	DefaultMaxBackoff = time.Minute
	// DefaultDrainTimeout is how long Run lets in-flight reconciles finish
	// after its context ends before it cancels their context.
	DefaultDrainTimeout = 30 * time.Second
)

// ErrDemoted is the cause (context.Cause) of a reconcile context that
// Demote cancelled: the replica lost its leadership while the reconcile ran.
var ErrDemoted = errors.New("demoted: this replica is no longer leader")

// NoRetries, as ControllerOptions.MaxRetries, drops a key at its first
// failure: it is never retried.
const NoRetries = -1

// options are ControllerOptions' settings of the queue, with the defaults
// applied.
type options struct {
	rateLimiter  workqueue.TypedRateLimiter[string]
	maxRetries   int // negative: no cap
	drainTimeout time.Duration
}

// withDefaults validates the queue settings of c and applies their
// defaults.
func (c ControllerOptions) withDefaults() (options, error) {
	switch {
	case c.MaxBackoff < 0:
		return options{}, fmt.Errorf("controller %s: MaxBackoff %v is negative", c.WorkQueueName, c.MaxBackoff)
	case c.DrainTimeout < 0:
		return options{}, fmt.Errorf("controller %s: DrainTimeout %v is negative", c.WorkQueueName, c.DrainTimeout)
	case c.MaxRetries < NoRetries:
		return options{}, fmt.Errorf("controller %s: MaxRetries %d is below NoRetries (-1)", c.WorkQueueName, c.MaxRetries)
	}
	o := options{rateLimiter: c.RateLimiter, maxRetries: c.MaxRetries, drainTimeout: c.DrainTimeout}
	switch c.MaxRetries {
	case 0:
		o.maxRetries = -1 // no cap
	case NoRetries:
		o.maxRetries = 0
	}
	if o.drainTimeout == 0 {
		o.drainTimeout = DefaultDrainTimeout
	}
	if o.rateLimiter == nil {
		maxBackoff := c.MaxBackoff
		if maxBackoff == 0 {
			maxBackoff = DefaultMaxBackoff
		}
		o.rateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](DefaultBaseBackoff, max(maxBackoff, DefaultBaseBackoff))
	}
	return o, nil
}

// Impl runs a Reconciler over a rate-limited work queue of keys. Build it
// with NewImpl, wire informer event handlers to its Enqueue methods, then
// call Run once.
//
// Neither NewImpl nor the Enqueue methods start goroutines: keys enqueued
// before Run are held and handed to the queue when Run starts, and Run owns
// every goroutine it starts, all of which have ended when it returns. Keys
// enqueued after Run returned are dropped.
type Impl struct {
	name       string
	reconciler Reconciler
	aware      LeaderAware // reconciler, when it is LeaderAware
	logger     *zap.Logger
	opts       options
	// configured is ControllerOptions.Observer; never written after New.
	configured Observer
	// observer is configured, else taken from Run's context before the
	// workers start; nil when neither has one.
	observer Observer

	mu sync.Mutex
	// Before Run: keys in the order first enqueued, and when each is due.
	pendingOrder []string
	pending      map[string]time.Time
	queue        workqueue.TypedRateLimitingInterface[string]

	// leaderMu serializes Promote and Demote.
	leaderMu sync.Mutex
	leader   atomic.Bool // written under termMu
	// termMu guards the reconciles in flight and the keys missed as a
	// follower, so that no reconcile starts half-way through a change of
	// leadership.
	termMu sync.Mutex
	// inflight holds the cancel function of every reconcile running now;
	// Demote calls them all, with cause ErrDemoted.
	inflight map[*reconcileRun]struct{}
	// missed holds, for a LeaderAware reconciler, the keys reconciled while
	// the Impl was not leader, which the next Promote enqueues: a set, so it
	// grows with the number of distinct keys, never with time.
	missed map[string]struct{}
}

// New returns an Impl that feeds keys to r, configured by opts (see
// ControllerOptions; the zero value is the default), or an error naming
// the field opts sets wrongly. opts.WorkQueueName identifies the
// controller in logs and queue metrics; every log line the Impl writes,
// and the logger it gives Reconcile, carry it as the "controller" field.
// A nil opts.Logger logs nothing.
func New(r Reconciler, opts ControllerOptions) (*Impl, error) {
	if r == nil {
		return nil, fmt.Errorf("controller %s: nil Reconciler", opts.WorkQueueName)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	aware, _ := r.(LeaderAware)
	return &Impl{
		name:       opts.WorkQueueName,
		reconciler: r,
		aware:      aware,
		logger:     logger.With(zap.String("controller", opts.WorkQueueName)),
		opts:       o,
		configured: opts.Observer,
		pending:    map[string]time.Time{},
	}, nil
}

// NewImpl is New with the default queue settings, named name and logging
// with logger (nil logs nothing). It keeps the shape knative-ported code
// calls and returns no error, so it panics when r is nil (see MIGRATING.md).
func NewImpl(r Reconciler, logger *zap.Logger, name string) *Impl {
	impl, err := New(r, ControllerOptions{WorkQueueName: name, Logger: logger})
	if err != nil {
		panic("controller.NewImpl: " + err.Error())
	}
	return impl
}

// Name returns the name given to NewImpl.
func (i *Impl) Name() string { return i.name }

// Reconciler returns the Reconciler given to NewImpl, so that a process can
// find the roles it plays besides reconciling (an admission controller for
// its webhook server, say) from the Impl its constructor returned.
func (i *Impl) Reconciler() Reconciler { return i.reconciler }

// Run starts workers goroutines that reconcile keys from the queue and
// blocks until ctx ends. Then it stops handing out keys (keys still queued
// are dropped: the next process lists them again), waits for in-flight
// reconciles to return and returns. Those reconciles keep a live context for
// the drain timeout (ControllerOptions.DrainTimeout); if any outlives it, its context is
// cancelled and Run, after it returns, reports an error.
//
// Run returns an error without doing anything when workers is below 1 or
// when Run was already called.
func (i *Impl) Run(ctx context.Context, workers int) error {
	if workers < 1 {
		return fmt.Errorf("controller %s: workers must be at least 1, got %d", i.name, workers)
	}
	if i.configured != nil {
		// Reconciles find the Impl's observer where they find the
		// process's: in their context.
		ctx = WithObserver(ctx, i.configured)
	}
	q, err := i.startQueue(ObserverFrom(ctx))
	if err != nil {
		return err
	}

	// Reconciles get a context that outlives ctx, so the drain can let
	// them finish their writes instead of failing them half-way.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { i.work(ctx, workCtx, q) })
	}
	i.logger.Info("controller started", zap.Int("workers", workers))

	<-ctx.Done()
	i.logger.Info("controller stopping; draining in-flight reconciles")
	q.ShutDown()
	var timedOut atomic.Bool
	timer := time.AfterFunc(i.opts.drainTimeout, func() {
		timedOut.Store(true)
		cancelWork()
	})
	wg.Wait()
	timer.Stop()
	if timedOut.Load() {
		return fmt.Errorf("controller %s: in-flight reconciles outlived the drain timeout of %s and were cancelled", i.name, i.opts.drainTimeout)
	}
	i.logger.Info("controller stopped")
	return nil
}

// startQueue builds the queue (whose delaying loop is a goroutine, which is
// why it waits for Run) and moves the keys enqueued so far into it. The
// queue reports to observer, when there is one.
func (i *Impl) startQueue(observer Observer) (workqueue.TypedRateLimitingInterface[string], error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.queue != nil {
		return nil, fmt.Errorf("controller %s: Run called more than once", i.name)
	}
	cfg := workqueue.TypedRateLimitingQueueConfig[string]{Name: i.name}
	if observer != nil {
		// Set per queue, never through client-go's global SetProvider.
		cfg.MetricsProvider = observer
	}
	i.observer = observer
	q := workqueue.NewTypedRateLimitingQueueWithConfig(i.opts.rateLimiter, cfg)
	now := time.Now()
	for _, key := range i.pendingOrder {
		if d := i.pending[key].Sub(now); d > 0 {
			q.AddAfter(key, d)
		} else {
			q.Add(key)
		}
	}
	i.pending, i.pendingOrder = nil, nil
	i.queue = q
	return q, nil
}

func (i *Impl) work(ctx, workCtx context.Context, q workqueue.TypedRateLimitingInterface[string]) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		if ctx.Err() != nil {
			// Stopping: take no new work. The queue still hands out what
			// it holds after ShutDown, so this check is what ends the loop.
			q.Done(key)
			return
		}
		i.process(workCtx, q, key)
	}
}

func (i *Impl) process(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], key string) {
	defer q.Done(key)
	logger := i.logger.With(zap.String("key", key), zap.String("reconcileID", newReconcileID()))
	run := i.begin(ctx, key)
	start := time.Now()
	err := i.reconcile(logging.WithLogger(run.ctx, logger), key)
	elapsed := time.Since(start)
	took := zap.Duration("duration", elapsed)
	demoted := i.end(run)
	if i.observer != nil {
		i.observer.Reconciled(i.name, outcomeOf(err, demoted && i.aware != nil), elapsed)
	}

	if demoted && i.aware != nil {
		// Its writes may be half done, and as a follower it would skip
		// them: the next promotion reconciles the key again.
		q.Forget(key)
		i.keepForPromotion(key)
		logger.Info("reconcile cut short by demotion; the next promotion reconciles the key again", took, zap.NamedError("result", err))
		return
	}
	if err == nil {
		q.Forget(key)
		logger.Debug("reconcile succeeded", took)
		return
	}
	if IsPermanentError(err) {
		q.Forget(key)
		logger.Error("reconcile failed permanently; waiting for a change", took, zap.Error(err))
		return
	}
	if after, ok := IsRequeueAfter(err); ok {
		q.Forget(key)
		q.AddAfter(key, after)
		logger.Debug("reconcile requeued", took, zap.Duration("after", after))
		return
	}
	if retries := q.NumRequeues(key); i.opts.maxRetries >= 0 && retries >= i.opts.maxRetries {
		q.Forget(key)
		logger.Error("reconcile failed; dropping key after retries", took, zap.Int("retries", retries), zap.Error(err))
		return
	}
	q.AddRateLimited(key)
	if IsWaiting(err) || apierrors.IsConflict(err) {
		logger.Info("reconcile waiting; will retry", took, zap.Int("retry", q.NumRequeues(key)), zap.NamedError("waiting", err))
		return
	}
	logger.Warn("reconcile failed; will retry", took, zap.Int("retry", q.NumRequeues(key)), zap.Error(err))
}

// outcomeOf classifies a reconcile's error as process does; demoted is
// whether a demotion cut the reconcile short.
func outcomeOf(err error, demoted bool) Outcome {
	switch {
	case demoted:
		return OutcomeDemoted
	case err == nil:
		return OutcomeSuccess
	case IsPermanentError(err):
		return OutcomePermanent
	}
	if _, ok := IsRequeueAfter(err); ok {
		return OutcomeRequeue
	}
	return OutcomeError
}

// reconcile calls the Reconciler, turning a panic into an error: a
// reconciler runs code the framework does not own (a Binding's Do and
// Undo), and one bad object must not end the process and stop every other
// key. The key is retried like any failure; the stack goes to the log.
func (i *Impl) reconcile(ctx context.Context, key string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			logging.FromContext(ctx).Error("reconcile panicked", zap.Any("panic", r), zap.StackSkip("stack", 1))
			err = fmt.Errorf("reconcile %s: panic: %v", key, r)
		}
	}()
	return i.reconciler.Reconcile(ctx, key)
}

// newReconcileID returns 8 random hex digits: short enough to read in a log
// line, random enough to tell attempts apart.
func newReconcileID() string {
	var b [4]byte
	v := rand.Uint32()
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	return hex.EncodeToString(b[:])
}
