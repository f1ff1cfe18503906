package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/metrics"
	"github.com/bindkit/bindkit/webhook"
)

// ReadyzCheckName is the name of the readiness check Add registers on the
// Manager: failing until bindkit's informers have synced, while an
// admission controller's index is not built or reports a fault (a
// declarative kind's handover refused by the kube-apiserver), and once
// bindkit has stopped with an error.
const ReadyzCheckName = "bindkit"

// Add runs opts.Kinds (and opts.Controllers) inside mgr, as
// sharedmain.Run runs them in a process of their own:
//
//   - bindkit's clients are built from the Manager's rest.Config, and its
//     informers (the Bindings' typed informers and the slim metadata-only
//     subject cache) start with the Manager and stop with it;
//   - the reconcilers run opts.Workers workers on every replica, and
//     write only while the Manager leads: they are promoted when the
//     Manager wins its election (at once without leader election) and
//     demoted when it stops leading;
//   - the admission controllers are mounted on the Manager's webhook
//     server at each kind's WebhookPath, bounded and panic-safe as
//     bindkit's own server is (webhook.NewHandler); they program each
//     kind's MutatingWebhookConfiguration as under sharedmain, with the
//     CA of opts.CertificatesSecret as its caBundle;
//   - a declarative kind is admitted by MutatingAdmissionPolicy when the
//     kube-apiserver serves it, and then needs no webhook route;
//   - bindkit's metrics go to opts.MetricsRegistry (the Manager's by
//     default), its logs to the Manager's logger, and a readiness check
//     named ReadyzCheckName and a liveness check named HealthzCheckName
//     join the Manager's.
//
// A panic in a Binding's Do or Undo, or anywhere in a reconcile or an
// admission, is contained as bindkit contains it: the key is retried, the
// request answered 500, and the Manager keeps running. When the Manager's
// context ends, the reconcilers drain while still leader, then leadership
// is given up, then the webhook server stops, within the Manager's
// GracefulShutdownTimeout.
//
// Add must be called before mgr.Start, once per Manager, with every kind
// the Manager binds: they share one set of informers. It returns an error
// naming every bad option, or what a constructor refused, and adds
// nothing to mgr then. The Manager's ServiceAccount needs the permissions
// of a sharedmain process (see the example's config/rbac).
func Add(mgr manager.Manager, opts Options) error {
	if opts.CacheSyncTimeout == 0 {
		// The Manager's own bound on its controllers' caches, when set.
		opts.CacheSyncTimeout = mgr.GetControllerOptions().CacheSyncTimeout
	}
	o, err := opts.withDefaults()
	if err != nil {
		return fmt.Errorf("bindkit: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = zapFromLogr(mgr.GetLogger().WithName("bindkit"))
	}
	r, err := build(mgr.GetConfig(), o, logger)
	if err != nil {
		return fmt.Errorf("bindkit: %w", err)
	}
	if r.handler != nil {
		server := mgr.GetWebhookServer()
		for _, a := range r.admitters {
			server.Register(a.Path(), r.handler)
		}
	}
	if err := errors.Join(
		mgr.Add(r),
		mgr.Add(&leader{r}),
		mgr.AddReadyzCheck(ReadyzCheckName, r.ready),
		mgr.AddHealthzCheck(HealthzCheckName, r.alive),
	); err != nil {
		r.stopBase()
		r.registry.unregisterAll()
		return fmt.Errorf("bindkit: add to the Manager: %w", err)
	}
	return nil
}

// build makes the clients, informers, controllers and admission handler
// that Add gives the Manager to run.
func build(mgrConfig *rest.Config, o Options, logger *zap.Logger) (_ *binder, err error) {
	// Informers outlive the Manager's context: the reconcilers still read
	// their caches while they drain. They stop when binder.Start returns.
	// It carries the logger, so the reconciles run in it log there too.
	base, stopBase := context.WithCancel(logging.WithLogger(context.Background(), logger))
	defer func() {
		if err != nil {
			stopBase()
		}
	}()
	ctx := injection.WithSystemNamespace(base, o.SystemNamespace)
	cfg := rest.CopyConfig(mgrConfig)
	cfg.QPS, cfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	cfg.UserAgent = o.Component + "/bindkit (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
	ictx, informers, err := injection.New(ctx, cfg, injection.Options{ResyncPeriod: o.ResyncPeriod})
	if err != nil {
		return nil, err
	}
	reg := &trackedRegisterer{reg: o.MetricsRegistry}
	defer func() {
		if err != nil {
			reg.unregisterAll()
		}
	}()
	m, err := metrics.New(reg)
	if err != nil {
		return nil, fmt.Errorf("Options.MetricsRegistry: %w (one registry serves one running Add)", err)
	}
	wopts := o.Webhook
	wopts.SecretName = o.CertificatesSecret
	wopts.Keys.CACert = o.CAKey
	wopts.Logger = logger.Named("webhook")
	wopts.Observer = m.Admission()
	ictx = webhook.WithOptions(ictx, wopts)
	ictx = controller.WithFieldManager(ictx, o.Component)
	cmw := configmap.NewInformedWatcher(injection.KubeClient(ictx), o.SystemNamespace)
	var ctors []sharedmain.Constructor
	for _, k := range o.Kinds {
		ctors = append(ctors, k.Controller, k.Webhook)
	}
	impls, err := construct(ictx, cmw, append(ctors, o.Controllers...))
	if err != nil {
		return nil, err
	}
	b := &binder{
		opts: o, logger: logger, base: base, stopBase: stopBase, informers: informers, cmw: cmw,
		impls: impls, metrics: m, registry: reg, synced: make(chan struct{}),
	}
	for _, impl := range impls {
		m.WatchLeaders(impl)
		if ix, ok := impl.Reconciler().(metrics.Index); ok {
			m.WatchIndexes(ix)
		}
		if a, ok := impl.Reconciler().(webhook.Admitter); ok {
			b.admitters = append(b.admitters, a)
		}
	}
	if len(b.admitters) > 0 {
		if b.handler, err = webhook.NewHandler(wopts, b.admitters...); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// construct calls each constructor, turning a panic (a knative-shaped
// constructor's way to report a wiring mistake) into an error naming it.
func construct(ctx context.Context, cmw configmap.Watcher, ctors []sharedmain.Constructor) ([]*controller.Impl, error) {
	impls := make([]*controller.Impl, 0, len(ctors))
	for i, ctor := range ctors {
		impl, err := callConstructor(ctx, cmw, ctor)
		if err != nil {
			return nil, fmt.Errorf("controller constructor %d: %w", i, err)
		}
		impls = append(impls, impl)
	}
	return impls, nil
}

func callConstructor(ctx context.Context, cmw configmap.Watcher, ctor sharedmain.Constructor) (impl *controller.Impl, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if impl = ctor(ctx, cmw); impl == nil {
		return nil, errors.New("returned a nil Impl")
	}
	return impl, nil
}
