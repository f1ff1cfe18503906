package sharedmain

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/metrics"
	"github.com/bindkit/bindkit/webhook"
)

// run sets the process up, serves its listeners, waits for its caches,
// runs its components until ctx ends or one fails, and drains them in
// the order Run documents.
func (p *process) run(ctx context.Context, ctors []Constructor) error {
	s, err := p.setUp(ctx, ctors)
	if err != nil {
		return err
	}
	defer s.close()
	if p.flags.Uninstall {
		return p.uninstall(controller.WithFieldManager(s.ctx, p.component), s.base, s.cmw, s.informers, s.impls)
	}
	if len(s.admission) > 0 {
		if p.certs, s.server, err = newWebhook(s.ictx, s.namespace, p.component, p.flags, s.webhookOptions, p.logger, s.metrics, s.admission); err != nil {
			return err
		}
	}
	if s.registry != nil && p.flags.MetricsAddress != MetricsOff {
		if s.metricsServer, err = newMetricsServer(p.flags, s.registry, s.kube, p.logger.Named("metrics")); err != nil {
			return err
		}
	}
	f := newFailures()
	// Listen before waiting for caches, so a taken port fails fast and a
	// caller that asked for port 0 learns its port early.
	srv, probes, err := p.startServers(s, f)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := p.waitForCaches(s.ctx, s.base, s.cmw, s.informers); err != nil {
		return err
	}
	if probes != nil {
		probes.ready.Store(true)
	}
	return p.runComponents(s, srv, f)
}

// state is what run builds before anything serves.
type state struct {
	// ctx carries the system namespace; ictx is the injection context the
	// constructors saw.
	ctx, ictx context.Context
	namespace string
	metrics   *metrics.Metrics // nil when metrics are off
	registry  *prometheus.Registry
	// metricsServer serves registry; nil when the endpoint is off.
	metricsServer *metricsServer
	// base is the informers' context: they outlive ctx, since the webhook
	// and the controllers still read their caches while they drain.
	base           context.Context
	stopBase       context.CancelFunc
	informers      *injection.InformerSet
	cmw            *configmap.InformedWatcher
	kube           kubernetes.Interface
	impls          []*controller.Impl
	admission      []webhook.Admitter
	webhookOptions webhook.Options
	server         *webhook.Server // nil without admission
	// undo are run in reverse by close.
	undo []func()
}

// close undoes what setUp did, the latest first.
func (s *state) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// setUp validates the flags, builds the metrics, clients, informers and
// ConfigMap watcher, and calls the constructors. On error it has undone
// what it did.
func (p *process) setUp(ctx context.Context, ctors []Constructor) (_ *state, err error) {
	if err := p.flags.Validate(); err != nil {
		return nil, err
	}
	s := &state{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.namespace, err = systemNamespace(ctx); err != nil {
		return nil, err
	}
	s.ctx = injection.WithSystemNamespace(ctx, s.namespace)
	if s.metrics, s.registry, err = newMetrics(s.ctx, p.flags); err != nil {
		return nil, err
	}
	if s.metrics != nil {
		s.undo = append(s.undo, s.metrics.AttachClientGo())
	}
	s.base, s.stopBase = context.WithCancel(context.WithoutCancel(s.ctx))
	s.undo = append(s.undo, s.stopBase)
	if s.ictx, s.informers, err = p.newInjection(s.ctx, s.base); err != nil {
		return nil, err
	}
	s.undo = append(s.undo, s.informers.Shutdown)
	s.kube = injection.KubeClient(s.ictx)
	s.cmw = configmap.NewInformedWatcher(s.kube, s.namespace)
	s.undo = append(s.undo, s.cmw.Shutdown)
	s.cmw.Watch(ConfigLoggingName, levelObserver(p.component, p.level, p.logger))

	s.webhookOptions = webhookOptions(s.ictx, p.flags, p.logger)
	s.ictx = webhook.WithOptions(s.ictx, s.webhookOptions)
	// Constructors see the field manager the Impls' reconciles will write
	// with (a declarative kind's policy spares those writes).
	s.ictx = controller.WithFieldManager(s.ictx, p.component)
	if s.impls, err = construct(s.ictx, s.cmw, ctors); err != nil {
		return nil, err
	}
	p.impls = s.impls
	s.admission = admitters(s.impls)
	return s, nil
}

// failures gathers the errors of the process's components as they run;
// the first closes failed, which starts the shutdown.
type failures struct {
	failed chan struct{}
	once   sync.Once
	mu     sync.Mutex
	errs   []error
}

func newFailures() *failures { return &failures{failed: make(chan struct{})} }

// report records err; nil is no failure.
func (f *failures) report(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
	f.once.Do(func() { close(f.failed) })
}

// err joins the errors reported.
func (f *failures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}

// servers are the process's HTTP servers (probes, the webhook's probes,
// metrics, the webhook), reporting to one failures and stopped together.
type servers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	report func(error)
	// unserved is the main listener until a server takes it (the probes
	// at once, or the webhook once the components run); stop closes it.
	unserved net.Listener
}

// serve runs fn on the servers' context until stop.
func (s *servers) serve(fn func(context.Context) error) {
	s.wg.Go(func() { s.report(fn(s.ctx)) })
}

// take hands the main listener to its server.
func (s *servers) take() net.Listener {
	ln := s.unserved
	s.unserved = nil
	return ln
}

// stop ends every server and waits for them; a second call does nothing
// more.
func (s *servers) stop() {
	s.cancel()
	if s.unserved != nil {
		s.unserved.Close()
		s.unserved = nil
	}
	s.wg.Wait()
}

// startServers listens where the flags say, reports the addresses, and
// serves at once the probes (which answer during the cache sync, so a
// liveness probe does not kill a process merely slow to list), the
// webhook's probes and the metrics (so a slow sync shows in them too).
// The webhook's listener waits for the webhook.
func (p *process) startServers(s *state, f *failures) (*servers, *probes, error) {
	ln, webhookProbeLn, metricsLn, probeHandler, err := p.listen(s.server != nil, s.metricsServer != nil)
	if err != nil {
		return nil, nil, err
	}
	if err := p.reportListeners(ln, webhookProbeLn, metricsLn, probeHandler != nil); err != nil {
		closeAll(ln, webhookProbeLn, metricsLn)
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	srv := &servers{ctx: ctx, cancel: cancel, report: f.report, unserved: ln}
	if probeHandler != nil {
		probeLn := srv.take()
		srv.serve(func(ctx context.Context) error { return probeHandler.serve(ctx, probeLn) })
	}
	if webhookProbeLn != nil {
		srv.serve(func(ctx context.Context) error { return serveWebhookProbes(ctx, s.server, webhookProbeLn) })
	}
	if metricsLn != nil {
		p.logMetricsServing(metricsLn.Addr())
		srv.serve(func(ctx context.Context) error { return s.metricsServer.serve(ctx, metricsLn) })
	}
	return srv, probeHandler, nil
}

// runComponents runs the Impls (the certificates' too), campaigns for
// leadership unless HA is off, and serves the webhook, until s.ctx ends
// or a component fails; then drains: servers, workers, leadership (the
// Impls drain while this replica still leads, and only then is the lease
// released, so no reconcile is cut short by an orderly shutdown and no
// other replica writes while this one's finish), informers.
func (p *process) runComponents(s *state, srv *servers, f *failures) error {
	all := s.impls
	if p.certs != nil {
		all = append(append([]*controller.Impl(nil), s.impls...), p.certs)
	}
	watchScraped(s.metrics, all)
	// The Impls report to the metrics, and their reconcilers' writes name
	// the component as their field manager, through the context they run
	// in, whatever constructor built them.
	work, stopWork := context.WithCancel(withObservers(s.base, p.component, s.metrics))
	defer stopWork()
	lead, stopLeading := context.WithCancel(s.base)
	defer stopLeading()
	var workWG, leaderWG sync.WaitGroup
	for _, impl := range all {
		workWG.Go(func() { f.report(impl.Run(work, WorkersPerController)) })
	}
	if p.flags.DisableHA {
		for _, impl := range all {
			impl.Promote()
		}
	} else if err := p.campaign(lead, s.ictx, s.namespace, s.kube, all, &leaderWG, f.report); err != nil {
		f.report(err)
	}
	if s.server != nil {
		webhookLn := srv.take()
		srv.serve(func(ctx context.Context) error { return s.server.Serve(ctx, webhookLn) })
	}
	p.logger.Info("started", zap.String("systemNamespace", s.namespace), zap.Int("controllers", len(s.impls)),
		zap.Int("admissionControllers", len(s.admission)), zap.Bool("leaderElection", !p.flags.DisableHA))
	close(p.started)

	select {
	case <-s.ctx.Done():
		p.logger.Info("shutting down")
	case <-f.failed:
		p.logger.Error("a component failed; shutting down")
	}
	srv.stop()
	stopWork()
	workWG.Wait()
	stopLeading()
	leaderWG.Wait()
	if p.flags.DisableHA {
		for _, impl := range all {
			impl.Demote()
		}
	}
	s.stopBase()
	s.informers.Shutdown()
	s.cmw.Shutdown()
	return f.err()
}
