package sharedmain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/webhook"
)

// Constructor builds one controller from the process context, which carries
// the clients, the informer factories, the system namespace and the logger
// (see package injection). It requests the informers it needs, registers
// its ConfigMap observers on cmw and starts nothing.
type Constructor func(ctx context.Context, cmw configmap.Watcher) *controller.Impl

// WorkersPerController is how many reconciles each controller runs at once.
// A Binding's reconcile is a chain of round trips (its finalizer, its
// subjects' reads and patches, its status), so with one Binding per
// application namespace a controller converges at workers per round-trip
// chain: two workers made 400 such Bindings take twice as long as the
// same writes sent eight at a time (bench/RESULTS.md, many small
// Bindings). The subject patches stay bounded whatever the workers
// (psbinding.DefaultPatchConcurrency per Binding kind, shared by its
// reconciles); what eight workers add at once is the Bindings' own writes,
// one or two per reconcile.
const WorkersPerController = 8

// CacheSyncTimeout bounds the wait for the informers' caches at start-up. A
// process whose caches do not fill in that time exits with an error, so a
// missing RBAC rule shows as a crash loop rather than a silent hang.
const CacheSyncTimeout = 2 * time.Minute

// Main runs the controllers ctors build, and the admission webhook if any
// of them is an admission controller, as the process component: it parses
// os.Args (see ParseFlags), stops on SIGINT or SIGTERM and returns after a
// signal-driven shutdown. It exits 2 on a bad command line (0 for -h, and
// for --version, which prints ReadBuildInfo to stdout) and 1, with the
// reason on stderr, when start-up or a component fails.
func Main(component string, ctors ...Constructor) {
	flags, err := ParseFlags(component, os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, ErrVersion):
		fmt.Print(ReadBuildInfo())
		os.Exit(0)
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\n", component, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	MainWithContext(WithFlags(ctx, flags), component, ctors...)
}

// MainWithContext is Main without flags or signals, shaped like knative's:
// it takes its settings from ctx (see Run) and runs until ctx ends, then
// returns. A caller has nothing to check: when start-up or a component
// fails, MainWithContext logs the reason, writes it to stderr and exits the
// process with status 1 (after Run's cleanup), so a process that could not
// start never exits 0. Tests, which must not exit, call Run.
func MainWithContext(ctx context.Context, component string, ctors ...Constructor) {
	if err := Run(ctx, component, ctors...); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}

// Run is what MainWithContext does, returning the error instead of exiting.
// It takes its settings from ctx: WithFlags (checked with Flags.Validate),
// WithLogLevel, WithLogOutput, and injection.WithSystemNamespace or
// $SYSTEM_NAMESPACE.
//
// In order, it builds the clients (rate-limited by --kube-api-qps and
// --kube-api-burst) and informers (resynced every --resync-period) with
// injection.New, calls every constructor, finds the Impls whose Reconciler
// is a webhook.Admitter and, if there are any, adds a controller
// for the webhook's certificates Secret and a webhook server routing to
// them. It then starts the config-logging watcher and the informers and
// waits for their caches (at most CacheSyncTimeout), runs
// WorkersPerController workers per Impl, promotes every Impl at once under
// DisableHA or else campaigns for a Lease named component in the system
// namespace (controller.RunLeaderElected, with a client of its own), and
// serves the webhook, or health probes on ProbePort when there is none. The
// certificates controller writes only while leader, like any LeaderAware
// reconciler.
//
// When ctx ends it drains in order: the webhook turns unready, keeps
// serving for its grace period and finishes its requests; then the Impls
// finish their reconciles, still as leader; then leadership is released
// (the Impls are demoted and the Lease freed for another replica); then
// the informers stop. It returns nil after such a shutdown, with every
// goroutine it started ended. It returns an error that starts with
// component, after the same cleanup, when the settings are invalid,
// start-up fails or a component (the webhook, leader election, an Impl)
// fails while running.
func Run(ctx context.Context, component string, ctors ...Constructor) error {
	return newProcess(ctx, component).main(ctx, ctors)
}

func newProcess(ctx context.Context, component string) *process {
	level := levelFrom(ctx)
	return &process{
		component: component,
		flags:     flagsFrom(ctx),
		level:     level,
		logger:    newLogger(ctx, component, level),
		started:   make(chan struct{}),
	}
}

func (p *process) main(ctx context.Context, ctors []Constructor) error {
	// Syncing stderr fails on some platforms; there is nothing to do then.
	defer p.logger.Sync()
	// client-go's own lines (klog) join the process's log from the start.
	defer routeKlog(p.logger, p.level)()
	err := p.run(logging.WithLogger(ctx, p.logger), ctors)
	if err != nil {
		if hint := checkHint(err); hint != "" {
			p.logger.Error("stopped with error", zap.Error(err), zap.String("check", hint))
		} else {
			p.logger.Error("stopped with error", zap.Error(err))
		}
		return fmt.Errorf("%s: %w", p.component, err)
	}
	p.logger.Info("stopped")
	return nil
}

// clientsKey lets a test of this package build the injection context from
// fakes instead of a rest.Config.
type clientsKey struct{}

type newInjectionFunc func(ctx context.Context, opts injection.Options) (context.Context, *injection.InformerSet, error)

type process struct {
	component string
	flags     Flags
	level     zap.AtomicLevel
	logger    *zap.Logger

	// Set by run, for tests of this package.
	impls       []*controller.Impl
	certs       *controller.Impl
	metricsAddr net.Addr      // where metrics are served; nil when off
	started     chan struct{} // closed once everything runs
}

// campaign starts leader election for impls on wg until ctx ends, with a
// client of its own.
func (p *process) campaign(ctx, ictx context.Context, namespace string, kube kubernetes.Interface, impls []*controller.Impl, wg *sync.WaitGroup, report func(error)) error {
	id, err := identity()
	if err != nil {
		return err
	}
	client, err := electionClient(ictx, kube)
	if err != nil {
		return err
	}
	cfg := controller.LeaderElectionConfig{Namespace: namespace, Name: p.component, Identity: id}
	wg.Go(func() { report(controller.RunLeaderElected(ctx, client, cfg, impls...)) })
	return nil
}

// waitForCaches starts the ConfigMap watcher and the informers on base and
// waits for them at most CacheSyncTimeout, and no longer than ctx.
func (p *process) waitForCaches(ctx, base context.Context, cmw *configmap.InformedWatcher, informers *injection.InformerSet) error {
	syncCtx, cancel := context.WithTimeoutCause(ctx, CacheSyncTimeout, fmt.Errorf("caches not synced within %s (CacheSyncTimeout)", CacheSyncTimeout))
	defer cancel()
	// The watcher runs on base but its start-up is bounded by syncCtx:
	// Shutdown makes a pending Start return (configmap's test
	// TestInformedWatcherStartReturnsWhenItsCacheCannotSync).
	started := make(chan error, 1)
	go func() { started <- cmw.Start(base) }()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case <-syncCtx.Done():
		cmw.Shutdown()
		<-started
		return fmt.Errorf("configmap: watch ConfigMaps in namespace %s: %w", cmw.Namespace(), context.Cause(syncCtx))
	}
	informers.Start(base)
	if err := informers.WaitForCacheSync(syncCtx); err != nil {
		return err
	}
	return nil
}

// newInjection builds the clients and informers the process runs on,
// living as long as base: through the function a test put in ctx, or else
// from the flags' kubeconfig.
func (p *process) newInjection(ctx, base context.Context) (context.Context, *injection.InformerSet, error) {
	newInjection, ok := ctx.Value(clientsKey{}).(newInjectionFunc)
	if !ok {
		newInjection = func(ctx context.Context, opts injection.Options) (context.Context, *injection.InformerSet, error) {
			cfg, err := restConfig(p.flags)
			if err != nil {
				return nil, nil, err
			}
			// Writes that name no field manager (leases, events) are
			// attributed to the user agent's first word: the component.
			cfg.UserAgent = userAgent(p.component)
			// Each warning is logged once, not at every write (warningLog).
			cfg.WarningHandler = newWarningLog(p.logger.Named("kube-apiserver"))
			return injection.New(ctx, cfg, opts)
		}
	}
	return newInjection(base, injectionOptions(p.flags))
}

// construct calls each constructor, turning a panic (a constructor's way to
// report a wiring mistake) into an error that names the constructor.
func construct(ctx context.Context, cmw configmap.Watcher, ctors []Constructor) ([]*controller.Impl, error) {
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

func callConstructor(ctx context.Context, cmw configmap.Watcher, ctor Constructor) (impl *controller.Impl, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if ctor == nil {
		return nil, errors.New("nil Constructor")
	}
	if impl = ctor(ctx, cmw); impl == nil {
		return nil, errors.New("returned a nil Impl")
	}
	return impl, nil
}

// systemNamespace is injection.SystemNamespace with its panic turned into a
// start-up error.
func systemNamespace(ctx context.Context) (ns string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return injection.SystemNamespace(ctx), nil
}

// identity names this replica in the Lease: the host name (the pod name in
// a cluster) and a random suffix, so a restarted container never mistakes
// its predecessor's lease for its own.
func identity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	var b [4]byte
	rand.Read(b[:])
	return host + "_" + hex.EncodeToString(b[:]), nil
}

// Uninstaller is implemented by a reconciler that can undo everything its
// controller did (psbinding's BaseReconciler and AdmissionReconciler do);
// see Flags.Uninstall.
type Uninstaller interface {
	Uninstall(ctx context.Context) error
}

// uninstall runs in place of the controllers under --uninstall: with the
// caches synced and no controller, webhook or leader election running, it
// calls Uninstall on every reconciler that has it, the admission
// controllers first so that nothing new is bound, and returns what failed.
func (p *process) uninstall(ctx, base context.Context, cmw *configmap.InformedWatcher, informers *injection.InformerSet, impls []*controller.Impl) error {
	if err := p.waitForCaches(ctx, base, cmw, informers); err != nil {
		return err
	}
	var first, then []*controller.Impl
	for _, impl := range impls {
		if _, ok := impl.Reconciler().(Uninstaller); !ok {
			continue
		}
		if _, ok := impl.Reconciler().(webhook.Admitter); ok {
			first = append(first, impl)
		} else {
			then = append(then, impl)
		}
	}
	var errs []error
	for _, impl := range append(first, then...) {
		p.logger.Info("uninstall", zap.String("controller", impl.Name()))
		if err := impl.Reconciler().(Uninstaller).Uninstall(ctx); err != nil {
			errs = append(errs, fmt.Errorf("uninstall %s: %w", impl.Name(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.logger.Info("uninstalled: no subject is bound and no Binding holds a finalizer; delete the installation now", zap.Int("controllers", len(first)+len(then)))
	return nil
}
