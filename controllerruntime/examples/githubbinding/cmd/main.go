// Command manager is a kubebuilder-style operator that runs bindkit's
// GithubBinding kind inside its controller-runtime Manager: leader
// election, webhook server, certificates, metrics and probes are the
// Manager's, as kubebuilder scaffolds them; the Binding is bindkit's,
// added in one call (controllerruntime.Add).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	bindkitcr "github.com/bindkit/bindkit/controllerruntime"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/wiring"
)

// Names the deployment in config/ repeats: config/default's namePrefix
// turns config/webhook's mutating-webhook-configuration into
// WebhookConfigurationName.
const (
	WebhookConfigurationName = "githubbinding-mutating-webhook-configuration"
	WebhookName              = "mgithubbinding.bindings.bindkit.dev"
	WebhookPath              = "/mutate-bindings-bindkit-dev-v1alpha1-githubbinding"
	LeaderElectionID         = "githubbinding.bindkit.dev"
)

func main() {
	// flag.CommandLine, as kubebuilder's main: controller-runtime adds
	// --kubeconfig to it.
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	f := registerFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), f); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager stopped")
		os.Exit(1)
	}
}

// flags are kubebuilder's main's.
type flags struct {
	metricsAddr, probeAddr             string
	webhookHost                        string
	webhookPort                        int
	certPath, certName, certKey        string
	enableLeaderElection, enableHTTP2  bool
	leaderElectionNamespace, namespace string

	// registry, set by tests that run two Managers at once, is where
	// bindkit's metrics go; nil is the Manager's registry.
	registry prometheus.Registerer
}

func registerFlags(fs *flag.FlagSet) *flags {
	f := &flags{}
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to. Use :8080 for HTTP, or 0 to disable it.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	fs.StringVar(&f.webhookHost, "webhook-host", "", "The address the webhook server listens on (empty: all).")
	fs.IntVar(&f.webhookPort, "webhook-port", webhook.DefaultPort, "The port the webhook server listens on.")
	fs.StringVar(&f.certPath, "webhook-cert-path", "", "The directory that contains the webhook certificate (cert-manager's Secret, mounted).")
	fs.StringVar(&f.certName, "webhook-cert-name", "tls.crt", "The name of the webhook certificate file.")
	fs.StringVar(&f.certKey, "webhook-cert-key", "tls.key", "The name of the webhook key file.")
	fs.BoolVar(&f.enableLeaderElection, "leader-elect", false, "Enable leader election for the controller manager, so that only one replica writes.")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", os.Getenv(injection.SystemNamespaceEnv), "The namespace of the leader election Lease (in a cluster: the pod's).")
	fs.StringVar(&f.namespace, "system-namespace", os.Getenv(injection.SystemNamespaceEnv), "The namespace the manager runs in (bindkit never mutates it, and reads the certificate's Secret there).")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false, "If set, HTTP/2 will be enabled for the metrics and webhook servers.")
	return f
}

// run builds the Manager as kubebuilder's main does, adds the
// GithubBinding kind, and runs until ctx ends.
func run(ctx context.Context, cfg *rest.Config, f *flags) error {
	var tlsOpts []func(*tls.Config)
	if !f.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: f.metricsAddr, TLSOpts: tlsOpts},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: f.webhookHost, Port: f.webhookPort, TLSOpts: tlsOpts,
			CertDir: f.certPath, CertName: f.certName, KeyName: f.certKey,
		}),
		HealthProbeBindAddress:        f.probeAddr,
		LeaderElection:                f.enableLeaderElection,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       f.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("unable to create manager: %w", err)
	}

	// bindkit: the GithubBinding kind, its reconciler and its admission
	// webhook, and the namespace guard (a ValidatingAdmissionPolicy that
	// refuses a Binding naming another namespace's subject).
	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		WebhookConfigurationName: WebhookConfigurationName,
		WebhookName:              WebhookName,
		WebhookPath:              WebhookPath,
	})
	if err != nil {
		return err
	}
	if err := bindkitcr.Add(mgr, bindkitcr.Options{
		Kinds:           []*wiring.Kind{kind},
		Controllers:     []sharedmain.Constructor{wiring.NamespaceGuard(kind)},
		SystemNamespace: f.namespace,
		MetricsRegistry: f.registry,
	}); err != nil {
		return err
	}

	if err := errors.Join(
		mgr.AddHealthzCheck("healthz", healthz.Ping),
		mgr.AddReadyzCheck("readyz", healthz.Ping),
	); err != nil {
		return fmt.Errorf("unable to set up health checks: %w", err)
	}
	return mgr.Start(ctx)
}
