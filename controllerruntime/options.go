package controllerruntime

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

// Defaults of Options, as kubebuilder's config/certmanager names the
// serving certificate and cert-manager keys its Secret.
const (
	// DefaultCertificatesSecret is the Secret kubebuilder's cert-manager
	// Certificate writes the webhook's serving certificate to.
	DefaultCertificatesSecret = "webhook-server-cert"
	// DefaultCAKey is where cert-manager puts the CA in that Secret.
	DefaultCAKey = "ca.crt"
)

// Options are what Add needs beyond the Manager. Kinds is required; every
// other zero field takes the default its comment names, the same defaults
// a process of injection/sharedmain runs with.
type Options struct {
	// Kinds are the Binding kinds to run, each as wiring.New returned it:
	// their reconcilers and admission controllers. Required.
	Kinds []*wiring.Kind
	// Controllers are more constructors to run beside the kinds', built
	// from the same context (clients, informers, system namespace), such
	// as wiring.NamespaceGuard(kind) or a knative-shaped controller.
	// Default: none.
	Controllers []sharedmain.Constructor

	// Component names bindkit's part of the process: the field manager of
	// its writes (subject patches, Bindings' finalizers and status, the
	// webhook configurations), the source of its events and the first
	// word of its clients' user agent. Default: the first kind's
	// ControllerName with "-controller" appended.
	Component string
	// SystemNamespace is the namespace the Manager runs in: the webhook is
	// never called there and the certificates Secret is read there.
	// Default: $SYSTEM_NAMESPACE (injection.SystemNamespaceEnv); one of
	// the two is required.
	SystemNamespace string

	// CertificatesSecret is the Secret in SystemNamespace that holds the
	// CA of the Manager's webhook server's certificate, under CAKey; the
	// admission controllers publish it as their webhook's caBundle (and
	// keep trusting the CA it replaced until the certificates it signed
	// expire). cert-manager's Certificate writes it; the webhook server
	// reads the same certificate from its CertDir, where the Secret is
	// mounted. While the Secret is missing, the caBundle the configuration
	// already carries is kept, so a caBundle installed another way works
	// too. Default: DefaultCertificatesSecret.
	CertificatesSecret string
	// CAKey is the key of the CA in CertificatesSecret. Default:
	// DefaultCAKey.
	CAKey string
	// Webhook bounds what an admission request may make the handler hold
	// (ReadTimeout, MaxAdmissionsInFlight, MaxInFlightMemory,
	// MaxRequestBodyBytes, ObjectLimits), and chooses
	// CallInKubeNamespaces and DeclarativeByWebhook; each zero field takes
	// webhook.DefaultOptions' value. The settings of the listener and its
	// certificates (Address, Port, MaxConnections, GracePeriod,
	// TLSMinVersion, EnableHTTP2, ClientCAFile, ServiceName, SecretName,
	// Keys) are the Manager's webhook server's:
	// set them there; Add refuses them here.
	Webhook webhook.Options

	// Workers is how many reconciles each controller runs at once.
	// Default: sharedmain.WorkersPerController.
	Workers int
	// KubeAPIQPS and KubeAPIBurst rate-limit the clients bindkit builds
	// from the Manager's rest.Config (the Manager's own keep its limits).
	// Default: sharedmain.DefaultKubeAPIQPS and DefaultKubeAPIBurst;
	// negative QPS turns client-side limiting off.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// ResyncPeriod is how often bindkit's informers replay every object.
	// Default: sharedmain.DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// CacheSyncTimeout bounds the wait for bindkit's informers (its
	// ConfigMap watcher's too) at start-up; past it bindkit's runnable
	// returns an error and the Manager stops with it. Default: the
	// Manager's Controller.CacheSyncTimeout (controller-runtime's
	// config.Controller) when set, else sharedmain.CacheSyncTimeout.
	CacheSyncTimeout time.Duration
	// MetricsRegistry is where bindkit's metrics (package metrics) are
	// registered. Default: controller-runtime's metrics.Registry, which
	// the Manager's metrics server serves. One registry serves one running
	// Manager: the metrics leave it when the Manager stops.
	MetricsRegistry prometheus.Registerer
	// Logger receives bindkit's logs. Default: the Manager's logger
	// (Manager.GetLogger) named "bindkit".
	Logger *zap.Logger
}

// withDefaults returns o with its defaults applied, or an error naming
// every field it cannot honour.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if len(o.Kinds) == 0 {
		errs = append(errs, errors.New("Options.Kinds is empty: pass at least one wiring.Kind"))
	}
	for i, k := range o.Kinds {
		if k == nil || k.Controller == nil || k.Webhook == nil {
			errs = append(errs, fmt.Errorf("Options.Kinds[%d] is not a wiring.Kind that wiring.New returned", i))
		}
	}
	for i, c := range o.Controllers {
		if c == nil {
			errs = append(errs, fmt.Errorf("Options.Controllers[%d] is nil", i))
		}
	}
	if o.Component == "" && len(errs) == 0 {
		o.Component = o.Kinds[0].ControllerName + "-controller"
	}
	if o.Component != "" && (strings.ContainsAny(o.Component, " /\t\n") || len(o.Component) > 128) {
		errs = append(errs, fmt.Errorf("Options.Component %q: must be one word without slashes, at most 128 characters (it names a field manager)", o.Component))
	}
	o.SystemNamespace = cmp.Or(o.SystemNamespace, os.Getenv(injection.SystemNamespaceEnv))
	if o.SystemNamespace == "" {
		errs = append(errs, fmt.Errorf("Options.SystemNamespace is empty and $%s is unset: bindkit must know the namespace it runs in", injection.SystemNamespaceEnv))
	} else if msgs := validation.IsDNS1123Label(o.SystemNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("Options.SystemNamespace %q: %s", o.SystemNamespace, strings.Join(msgs, "; ")))
	}
	o.CertificatesSecret = cmp.Or(o.CertificatesSecret, DefaultCertificatesSecret)
	if msgs := validation.IsDNS1123Subdomain(o.CertificatesSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("Options.CertificatesSecret %q: %s", o.CertificatesSecret, strings.Join(msgs, "; ")))
	}
	o.CAKey = cmp.Or(o.CAKey, DefaultCAKey)
	errs = append(errs, listenerSettings(o.Webhook)...)
	o.Workers = cmp.Or(o.Workers, sharedmain.WorkersPerController)
	o.KubeAPIQPS = cmp.Or(o.KubeAPIQPS, sharedmain.DefaultKubeAPIQPS)
	o.KubeAPIBurst = cmp.Or(o.KubeAPIBurst, sharedmain.DefaultKubeAPIBurst)
	o.ResyncPeriod = cmp.Or(o.ResyncPeriod, sharedmain.DefaultResyncPeriod)
	o.CacheSyncTimeout = cmp.Or(o.CacheSyncTimeout, sharedmain.CacheSyncTimeout)
	for _, c := range []struct {
		field string
		v     int64
	}{
		{"Workers", int64(o.Workers)},
		{"KubeAPIBurst", int64(o.KubeAPIBurst)},
		{"ResyncPeriod", int64(o.ResyncPeriod)},
		{"CacheSyncTimeout", int64(o.CacheSyncTimeout)},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("Options.%s %d is negative", c.field, c.v))
		}
	}
	if o.MetricsRegistry == nil {
		o.MetricsRegistry = ctrlmetrics.Registry
	}
	return o, errors.Join(errs...)
}

// listenerSettings reports the webhook.Options fields that belong to the
// Manager's webhook server, which Add would otherwise silently ignore.
func listenerSettings(w webhook.Options) []error {
	var errs []error
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"Address", w.Address != ""},
		{"Port", w.Port != 0},
		{"TLSMinVersion", w.TLSMinVersion != 0},
		{"EnableHTTP2", w.EnableHTTP2},
		{"ClientCAFile", w.ClientCAFile != ""},
		{"SecretName", w.SecretName != ""},
		{"Keys", w.Keys != (webhook.Options{}).Keys},
		{"ServiceName", w.ServiceName != ""},
		{"MaxConnections", w.MaxConnections != 0},
		{"GracePeriod", w.GracePeriod != 0},
	} {
		if f.set {
			errs = append(errs, fmt.Errorf("Options.Webhook.%s: the Manager's webhook server owns its listener and certificates; set it there (webhook.Options of controller-runtime), or CertificatesSecret here", f.field))
		}
	}
	return errs
}
