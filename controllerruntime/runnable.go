package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/metrics"
	"github.com/bindkit/bindkit/webhook"
)

// binder runs bindkit's informers and the controllers' workers on every
// replica: a manager.Runnable that needs no leader election (so the
// Manager stops it before its leader-elected runnables, and the
// reconcilers drain while this replica still leads).
type binder struct {
	opts      Options
	logger    *zap.Logger
	base      context.Context
	stopBase  context.CancelFunc
	informers *injection.InformerSet
	cmw       *configmap.InformedWatcher
	impls     []*controller.Impl
	metrics   *metrics.Metrics
	registry  *trackedRegisterer
	admitters []webhook.Admitter
	handler   *webhook.Server // nil when no kind is admitted by webhook
	synced    chan struct{}   // closed once the caches are synced
	phase     tracker         // for the Manager's checks
}

// NeedLeaderElection is false: every replica keeps the caches and the
// admission indexes warm, and answers admissions.
func (b *binder) NeedLeaderElection() bool { return false }

// Start starts the informers, waits for their caches (at most
// Options.CacheSyncTimeout, and no longer than ctx: a cache that cannot
// sync, its resource forbidden say, is an error returned then, which
// stops the Manager), runs the controllers' workers until ctx ends or one
// fails, then drains them, stops the informers and takes bindkit's
// metrics out of the registry.
func (b *binder) Start(ctx context.Context) (err error) {
	defer b.registry.unregisterAll()
	defer b.stopBase()
	defer b.informers.Shutdown()
	defer b.cmw.Shutdown()
	defer func() {
		if err != nil {
			b.phase.set(func(p *phase) { p.failed = err })
		}
	}()
	b.phase.set(func(p *phase) { p.since = time.Now() })
	if err := b.waitForCaches(ctx); err != nil {
		if ctx.Err() != nil {
			// The Manager is stopping: no error of bindkit's.
			b.logger.Info("stopped before the caches synced", zap.Error(err))
			return nil
		}
		return fmt.Errorf("bindkit: %w", err)
	}
	b.phase.set(func(p *phase) { p.synced = true })
	close(b.synced)

	work, stopWork := context.WithCancel(controller.WithObserver(controller.WithFieldManager(b.base, b.opts.Component), b.metrics.Controllers()))
	defer stopWork()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		failed = make(chan struct{})
		once   sync.Once
	)
	for _, impl := range b.impls {
		wg.Go(func() {
			if err := impl.Run(work, b.opts.Workers); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				once.Do(func() { close(failed) })
			}
		})
	}
	b.logger.Info("started", zap.String("systemNamespace", b.opts.SystemNamespace),
		zap.Int("controllers", len(b.impls)), zap.Int("admissionControllers", len(b.admitters)))
	select {
	case <-ctx.Done():
		b.logger.Info("shutting down: draining the controllers")
	case <-failed:
		b.logger.Error("a controller failed; shutting down")
	}
	stopWork()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bindkit: %w", err)
	}
	return nil
}

// waitForCaches starts the ConfigMap watcher and the informers on base and
// waits for them, bounded by ctx and Options.CacheSyncTimeout.
func (b *binder) waitForCaches(ctx context.Context) error {
	syncCtx, cancel := context.WithTimeoutCause(ctx, b.opts.CacheSyncTimeout,
		fmt.Errorf("caches not synced within Options.CacheSyncTimeout %s", b.opts.CacheSyncTimeout))
	defer cancel()
	// The watcher runs on base, which outlives ctx, but its start-up is
	// bounded by syncCtx: Shutdown makes a pending Start return.
	started := make(chan error, 1)
	go func() { started <- b.cmw.Start(b.base) }()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-syncCtx.Done():
		b.cmw.Shutdown()
		<-started
		return fmt.Errorf("configmap: watch ConfigMaps in namespace %s: %w", b.cmw.Namespace(), context.Cause(syncCtx))
	}
	b.informers.Start(b.base)
	return b.informers.WaitForCacheSync(syncCtx)
}

// leader promotes the controllers while the Manager leads: a
// manager.Runnable that needs leader election, started when the Manager
// wins the election (at once when it runs without one) and stopped when
// it stops leading or shuts down.
type leader struct{ b *binder }

// NeedLeaderElection is true: the Manager starts it only as leader.
func (l *leader) NeedLeaderElection() bool { return true }

// Start promotes every controller once the caches have synced (a new
// leader enqueues every Binding it lists) and demotes them when ctx ends.
func (l *leader) Start(ctx context.Context) error {
	select {
	case <-l.b.synced:
	case <-ctx.Done():
		return nil
	}
	for _, impl := range l.b.impls {
		impl.Promote()
	}
	<-ctx.Done()
	for _, impl := range l.b.impls {
		impl.Demote()
	}
	return nil
}
