package crtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	bindkitcr "github.com/bindkit/bindkit/controllerruntime"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/wiring"
)

// DefaultSystemNamespace is where the Manager runs when
// Options.SystemNamespace is empty.
const DefaultSystemNamespace = "bindkit-system"

// DefaultStartTimeout bounds Start when Options.StartTimeout is zero.
const DefaultStartTimeout = time.Minute

// Options configure Start. Kinds is required; every other zero field
// takes the default its comment names.
type Options struct {
	// Kinds are the Binding kinds to run, as cmd/main.go wires them
	// (controllerruntime.Options.Kinds). Required.
	Kinds []*wiring.Kind
	// Controllers are more constructors to run beside the kinds'
	// (controllerruntime.Options.Controllers). Default: none.
	Controllers []sharedmain.Constructor
	// SystemNamespace is the namespace the Manager runs in, created when
	// missing: bindkit never calls its webhook there, and reads the
	// certificate's Secret there. Default: DefaultSystemNamespace.
	SystemNamespace string
	// WebhookConfigurations are YAML files holding the kinds'
	// MutatingWebhookConfigurations, as the project deploys them (its
	// config/): each kind's, found by name, is installed pointed at the
	// Manager. Default: none; each kind's is made up from its wiring's
	// names, failurePolicy Fail, no rules (bindkit programs them).
	WebhookConfigurations []string
	// Manager are the Manager's options. Start sets WebhookServer (on
	// 127.0.0.1, a port free at the time, the test certificate) and, when
	// empty, Metrics.BindAddress and HealthProbeBindAddress to "0" (off).
	// Default: the zero Options, no leader election: bindkit leads at once.
	Manager manager.Options
	// Setup, if set, is called with the Manager before it starts, after
	// bindkit was added, to add the project's own controllers. Default:
	// nothing.
	Setup func(manager.Manager) error
	// CacheSyncTimeout bounds bindkit's start-up
	// (controllerruntime.Options.CacheSyncTimeout). Default: the
	// Manager's.
	CacheSyncTimeout time.Duration
	// StartTimeout bounds Start: installing, starting the Manager and
	// waiting until it is ready. Default: DefaultStartTimeout.
	StartTimeout time.Duration
}

// Manager is a running Manager with bindkit added.
type Manager struct {
	manager.Manager
	// Registry holds bindkit's metrics of this Manager.
	Registry *prometheus.Registry
	// SystemNamespace is the namespace it runs in.
	SystemNamespace string
	// WebhookPort is the port of its webhook server on 127.0.0.1.
	WebhookPort int
	// CAPEM is the CA of its webhook server's certificate, which bindkit
	// publishes as each kind's caBundle.
	CAPEM []byte

	kube      kubernetes.Interface
	dyn       dynamic.Interface
	installed []string
	ready     healthz.Checker
	cancel    context.CancelFunc
	done      chan error
	certDir   string
	stopOnce  sync.Once
	stopErr   error
}

// Start runs opts.Kinds inside a new Manager on cfg (see the package
// documentation) until Stop or ctx ends, and returns once bindkit is
// ready, each kind's webhook configuration carries the CA, and the
// kube-apiserver admits writes of each kind's Bindings (the admission
// policies bindkit programs on them refuse writes for a moment after they
// are created); an error names what failed, and leaves nothing running.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (_ *Manager, err error) {
	if len(opts.Kinds) == 0 {
		return nil, errors.New("crtest: Options.Kinds is empty: pass the kinds cmd/main.go wires")
	}
	opts.SystemNamespace = cmp.Or(opts.SystemNamespace, DefaultSystemNamespace)
	timeout := cmp.Or(opts.StartTimeout, DefaultStartTimeout)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m := &Manager{Registry: prometheus.NewRegistry(), SystemNamespace: opts.SystemNamespace, done: make(chan error, 1)}
	if m.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("crtest: %w", err)
	}
	if m.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("crtest: %w", err)
	}
	defer func() {
		if err != nil {
			if stopErr := m.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	if err := m.installSystem(sctx); err != nil {
		return nil, err
	}
	if m.WebhookPort, err = envtest.FreePort(); err != nil {
		return nil, fmt.Errorf("crtest: webhook port: %w", err)
	}
	if err := m.installWebhookConfigurations(sctx, opts.Kinds, opts.WebhookConfigurations); err != nil {
		return nil, err
	}
	if err := m.build(cfg, opts); err != nil {
		return nil, err
	}
	mctx, mcancel := context.WithCancel(ctx)
	m.cancel = mcancel
	go func() { m.done <- m.Manager.Start(mctx) }()
	if err := m.waitReady(sctx, opts.Kinds); err != nil {
		return nil, fmt.Errorf("crtest: the Manager is not ready within %s: %w", timeout, err)
	}
	return m, nil
}

// build makes the Manager and adds bindkit to it.
func (m *Manager) build(cfg *rest.Config, opts Options) error {
	mo := opts.Manager
	mo.Metrics.BindAddress = cmp.Or(mo.Metrics.BindAddress, "0")
	if mo.Metrics.BindAddress == "0" {
		mo.Metrics = metricsserver.Options{BindAddress: "0"}
	}
	mo.HealthProbeBindAddress = cmp.Or(mo.HealthProbeBindAddress, "0")
	mo.WebhookServer = crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: m.WebhookPort, CertDir: m.certDir})
	mgr, err := manager.New(cfg, mo)
	if err != nil {
		return fmt.Errorf("crtest: new Manager: %w", err)
	}
	probe := &readinessOf{Manager: mgr}
	if err := bindkitcr.Add(probe, bindkitcr.Options{
		Kinds:            opts.Kinds,
		Controllers:      opts.Controllers,
		SystemNamespace:  opts.SystemNamespace,
		MetricsRegistry:  m.Registry,
		CacheSyncTimeout: opts.CacheSyncTimeout,
	}); err != nil {
		return fmt.Errorf("crtest: %w", err)
	}
	if opts.Setup != nil {
		if err := opts.Setup(mgr); err != nil {
			return fmt.Errorf("crtest: Options.Setup: %w", err)
		}
	}
	m.Manager, m.ready = mgr, probe.check
	return nil
}

// readinessOf is the Manager as controllerruntime.Add sees it, keeping the
// readiness check it registers, so that the test reads it without a probe
// server.
type readinessOf struct {
	manager.Manager
	check healthz.Checker
}

// AddReadyzCheck registers check on the Manager, and keeps bindkit's.
func (r *readinessOf) AddReadyzCheck(name string, check healthz.Checker) error {
	if name == bindkitcr.ReadyzCheckName {
		r.check = check
	}
	return r.Manager.AddReadyzCheck(name, check)
}

// Ready returns nil once bindkit is ready (controllerruntime's readiness
// check: informers synced, admission indexes built, no refused handover),
// else why not.
func (m *Manager) Ready() error {
	if m.ready == nil {
		return errors.New("crtest: bindkit was not added")
	}
	return m.ready(&http.Request{})
}

// Stop cancels the Manager's context, as SIGTERM does, waits at most a
// minute for it to return, and deletes the webhook configurations Start
// installed. It returns what the Manager returned. Calling it again
// returns the same.
func (m *Manager) Stop() error {
	m.stopOnce.Do(func() {
		var errs []error
		if m.cancel != nil {
			m.cancel()
			select {
			case err := <-m.done:
				errs = append(errs, err)
			case <-time.After(time.Minute):
				errs = append(errs, errors.New("crtest: the Manager did not stop within a minute of its context's end"))
			}
		}
		errs = append(errs, m.uninstall())
		if m.certDir != "" {
			errs = append(errs, os.RemoveAll(m.certDir))
		}
		m.stopErr = errors.Join(errs...)
	})
	return m.stopErr
}
