package sharedmain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/metrics"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/webhook"
)

// CertificatesControllerName names the controller that keeps the webhook's
// certificates Secret, in logs and among the Impls leader election moves.
const CertificatesControllerName = "certificates"

// admitters returns the reconcilers of impls that are also
// admission controllers, in constructor order.
func admitters(impls []*controller.Impl) []webhook.Admitter {
	var out []webhook.Admitter
	for _, impl := range impls {
		if ac, ok := impl.Reconciler().(webhook.Admitter); ok {
			out = append(out, ac)
		}
	}
	return out
}

// leaderCertificates lets only the leader write the certificates Secret.
//
// Every replica serves the webhook from the same Secret, through its
// informer, so one writer is enough; several would race on creation and
// could issue different CAs in turn while the webhook configuration's
// caBundle holds only one. On promotion the Secret's key is enqueued, so a
// new leader (and a single replica under --disable-ha, promoted at once)
// creates or repairs it without waiting for an event. A follower runs the
// read-only certificates.Reconciler.Observe instead, which reports a
// serving certificate no leader renews before it expires.
type leaderCertificates struct {
	controller.LeaderAwareFuncs
	certs *certificates.Reconciler
}

func (l *leaderCertificates) Reconcile(ctx context.Context, key string) error {
	if !l.IsLeader() {
		return l.certs.Observe(ctx, key)
	}
	return l.certs.Reconcile(ctx, key)
}

// webhookOptions returns the one description of the webhook that the
// server, the certificates reconciler and every admission controller of
// the process share: the Secret, its keys, the Service, where the webhook
// may be called, and the bounds on what it reads (Flags.Webhook). Run
// passes it to newWebhook explicitly, and stores it in the context
// (webhook.WithOptions) only for the knative-shaped admission controller
// constructors, which receive nothing else; it must be stored before they
// run.
//
// Options a caller stored in ctx with webhook.WithOptions, as a knative
// main does (webhook.Options{ServiceName, SecretName, Port}), are the
// starting point: what no flag sets (ServiceName, SecretName, Keys,
// TLSMinVersion, EnableHTTP2) is kept, and what a flag sets comes from the
// flag, with a warning when that overrides a different value the caller
// gave. Zero fields stay zero: webhook.New applies the defaults, once.
func webhookOptions(ctx context.Context, f Flags, logger *zap.Logger) webhook.Options {
	given, _ := webhook.OptionsFrom(ctx)
	opts := given
	opts.Address = f.WebhookAddress
	// sharedmain listens itself (the webhook's Port serves only
	// webhook.Server.Run), on the port the kernel picks for AnyPort.
	opts.Port = max(f.WebhookPort, 0)
	opts.GracePeriod = f.WebhookGracePeriod
	opts.CallInKubeNamespaces = f.WebhookKubeNamespaces
	opts.DeclarativeByWebhook = f.DeclarativeAdmission == policy.ByWebhook
	opts.Logger = logger.Named("webhook")
	opts.SettingNames = webhookFlagNames
	applyWebhookFlags(&opts, f.Webhook)
	for _, o := range []struct {
		flag         string
		given, value any
	}{
		{"--webhook-address", given.Address, opts.Address},
		{"--webhook-port", given.Port, opts.Port},
		{"--webhook-grace-period", given.GracePeriod, opts.GracePeriod},
		{"--webhook-read-timeout", given.ReadTimeout, opts.ReadTimeout},
		{"--webhook-max-request-body-bytes", given.MaxRequestBodyBytes, opts.MaxRequestBodyBytes},
		{"--webhook-client-ca", given.ClientCAFile, opts.ClientCAFile},
	} {
		if !reflect.ValueOf(o.given).IsZero() && o.given != o.value {
			logger.Warn("webhook setting from the context overridden by its flag; set it with the flag",
				zap.String("flag", o.flag), zap.Any("context", o.given), zap.Any("flag value", o.value))
		}
	}
	return opts
}

// newWebhook builds the certificates controller for the webhook's Secret
// and the webhook server routing to admission, both from opts
// (webhookOptions). Both read the Secret through the system
// namespace's informer, which they request here and which therefore must
// start afterwards. The admission controllers that publish the CA bundle
// (certificates.Publisher) are the ones the certificates reconciler waits
// for before it signs under a new CA.
//
// component is the field manager of the Secret's writes. With m, the
// server counts its admissions and the certificates reconciler reports
// expiry times and rotations there.
func newWebhook(ctx context.Context, namespace, component string, f Flags, opts webhook.Options, logger *zap.Logger, m *metrics.Metrics, admission []webhook.Admitter) (*controller.Impl, *webhook.Server, error) {
	if err := f.validateCertificates(); err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: %w", err)
	}
	secrets := injection.NamespacedKubeInformerFactory(ctx, namespace).Core().V1().Secrets()

	certOpts := opts.CertificateOptions(namespace)
	certOpts.IPAddresses = f.WebhookIPSANs
	certOpts.CAValidity, certOpts.CARotateBefore = f.WebhookCAValidity, f.WebhookCARotateBefore
	certOpts.ServingValidity, certOpts.ServingRotateBefore = f.WebhookCertValidity, f.WebhookCertRotateBefore
	var publishers []certificates.Publisher
	for _, ac := range admission {
		if p, ok := ac.(certificates.Publisher); ok {
			publishers = append(publishers, p)
		}
	}
	lc := &leaderCertificates{}
	impl := controller.NewImpl(lc, logger, CertificatesControllerName)
	certOptions := certificates.ReconcilerOptions{
		Lister:       secrets.Lister(),
		EnqueueAfter: impl.EnqueueKeyAfter,
		Publishers:   publishers,
		Logger:       logger.Named(CertificatesControllerName),
		FieldManager: component,
	}
	if m != nil {
		certOptions.Observer = m.Certificates()
		if opts.Observer == nil {
			opts.Observer = m.Admission()
		}
	}
	certs, err := certificates.NewReconciler(injection.KubeClient(ctx), certOpts, certOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: %w", err)
	}
	lc.certs = certs
	lc.PromoteFunc = func(enqueue func(string)) { enqueue(certs.Key()) }
	if _, err := secrets.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: controller.FilterWithName(certOpts.SecretName),
		Handler:    controller.HandleAll(impl.Enqueue),
	}); err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: secret %s/%s: watch: %w", namespace, certOpts.SecretName, err)
	}

	srv, err := webhook.New(opts, secrets.Lister().Secrets(namespace), admission...)
	if err != nil {
		return nil, nil, err
	}
	return impl, srv, nil
}

// registerWebhookFlags registers the flags that bound what the webhook's
// callers may send, and its client authentication, directly on the
// webhook's own Options (--webhook-read-timeout, --webhook-max-* and
// --webhook-client-ca): webhook.Options documents each setting and its
// default, and webhook.New applies the defaults and checks the values, so
// sharedmain keeps no copy of either. Only the flag names live here.
func registerWebhookFlags(fs *flag.FlagSet, o *webhook.Options) {
	fs.DurationVar(&o.ReadTimeout, "webhook-read-timeout", o.ReadTimeout, "longest time to read one admission request, headers and body; the request's own timeout shortens it")
	fs.IntVar(&o.MaxConnections, "webhook-max-connections", o.MaxConnections, "connections the webhook holds open at once; at the cap one is closed for a new one "+
		"(the one in a request whose handshake, headers or body pace is nearest its deadline, or, while that one is in its first second, a kept-alive one idle for a second or more), "+
		"unless the new one's address has sent no admission yet and holds 8 already: then it is reset before TLS; connections deciding an admission are never closed")
	fs.IntVar(&o.MaxConnectionsPerPeer, "webhook-max-connections-per-peer", o.MaxConnectionsPerPeer, "connections the webhook holds open from one IP address; "+
		"at the cap a new one closes one of that address's (chosen as at --webhook-max-connections), or, from an address that has sent no admission yet, is reset before TLS")
	fs.DurationVar(&o.HandshakeTimeout, "webhook-handshake-timeout", o.HandshakeTimeout, "longest time for a connection's TLS handshake")
	fs.DurationVar(&o.ReadHeaderTimeout, "webhook-read-header-timeout", o.ReadHeaderTimeout, "longest time for a request's headers; a body has as long again to start")
	fs.Var(byteQuantity{&o.MinBodyRate}, "webhook-min-body-rate", "slowest average pace, in bytes a second (a quantity, e.g. 256Ki), at which a body may arrive "+
		"once --webhook-read-header-timeout has passed; slower bodies are answered 408")
	fs.IntVar(&o.MaxAdmissionsInFlight, "webhook-max-in-flight", o.MaxAdmissionsInFlight, "admissions decided at once; more are answered 429 with Retry-After")
	fs.Var(byteQuantity{&o.MaxInFlightMemory}, "webhook-max-in-flight-memory", "estimated memory admissions in flight may hold together (a quantity, e.g. 48Mi); beyond it requests are answered 429")
	fs.Var(byteQuantity{&o.MaxRequestBodyBytes}, "webhook-max-request-body-bytes", "largest admission request body (a quantity, e.g. 7Mi); larger ones are answered 413")
	fs.IntVar(&o.ObjectLimits.MaxDepth, "webhook-max-object-depth", o.ObjectLimits.MaxDepth, "deepest nesting of objects and arrays in an admitted object")
	fs.IntVar(&o.ObjectLimits.MaxContainers, "webhook-max-containers", o.ObjectLimits.MaxContainers, "most containers, init containers or ephemeral containers in an admitted pod template")
	fs.IntVar(&o.ObjectLimits.MaxVolumes, "webhook-max-volumes", o.ObjectLimits.MaxVolumes, "most volumes in an admitted pod template")
	fs.IntVar(&o.ObjectLimits.MaxEnv, "webhook-max-env", o.ObjectLimits.MaxEnv, "most env (or envFrom) entries of one container of an admitted pod template")
	fs.IntVar(&o.ObjectLimits.MaxVolumeMounts, "webhook-max-volume-mounts", o.ObjectLimits.MaxVolumeMounts, "most volumeMounts of one container of an admitted pod template")
	fs.Var(byteQuantity{&o.ObjectLimits.MaxPatchBytes}, "webhook-max-patch-bytes", "largest JSON patch the webhook answers with (a quantity, e.g. 1Mi)")
	fs.StringVar(&o.ClientCAFile, "webhook-client-ca", o.ClientCAFile, "PEM file of CAs whose client certificates may call the webhook; empty lets any caller in. When set, probes are also served over HTTP on --probe-port")
}

// webhookFlagNames name the webhook.Options fields registerWebhookFlags
// (and Flags' own webhook flags) set by their flags, so the webhook's
// answers to a refused caller name the flag to change
// (webhook.Options.SettingNames).
var webhookFlagNames = map[string]string{
	"ReadTimeout":                  "--webhook-read-timeout",
	"MaxConnections":               "--webhook-max-connections",
	"MaxConnectionsPerPeer":        "--webhook-max-connections-per-peer",
	"HandshakeTimeout":             "--webhook-handshake-timeout",
	"ReadHeaderTimeout":            "--webhook-read-header-timeout",
	"MinBodyRate":                  "--webhook-min-body-rate",
	"MaxAdmissionsInFlight":        "--webhook-max-in-flight",
	"MaxInFlightMemory":            "--webhook-max-in-flight-memory",
	"MaxRequestBodyBytes":          "--webhook-max-request-body-bytes",
	"ObjectLimits.MaxDepth":        "--webhook-max-object-depth",
	"ObjectLimits.MaxContainers":   "--webhook-max-containers",
	"ObjectLimits.MaxVolumes":      "--webhook-max-volumes",
	"ObjectLimits.MaxEnv":          "--webhook-max-env",
	"ObjectLimits.MaxVolumeMounts": "--webhook-max-volume-mounts",
	"ObjectLimits.MaxPatchBytes":   "--webhook-max-patch-bytes",
	"ClientCAFile":                 "--webhook-client-ca",
}

// validateWebhookFlags reports the first negative bound among the flags
// registerWebhookFlags sets, naming its flag; webhook.New checks the
// rest (and these again, naming the Options field, for callers without
// flags).
func validateWebhookFlags(o webhook.Options) error {
	for _, c := range []struct {
		field string
		v     int64
	}{
		{"ReadTimeout", int64(o.ReadTimeout)},
		{"MaxConnections", int64(o.MaxConnections)},
		{"MaxConnectionsPerPeer", int64(o.MaxConnectionsPerPeer)},
		{"HandshakeTimeout", int64(o.HandshakeTimeout)},
		{"ReadHeaderTimeout", int64(o.ReadHeaderTimeout)},
		{"MaxAdmissionsInFlight", int64(o.MaxAdmissionsInFlight)},
		{"ObjectLimits.MaxDepth", int64(o.ObjectLimits.MaxDepth)},
		{"ObjectLimits.MaxContainers", int64(o.ObjectLimits.MaxContainers)},
		{"ObjectLimits.MaxVolumes", int64(o.ObjectLimits.MaxVolumes)},
		{"ObjectLimits.MaxEnv", int64(o.ObjectLimits.MaxEnv)},
		{"ObjectLimits.MaxVolumeMounts", int64(o.ObjectLimits.MaxVolumeMounts)},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s must not be negative", webhookFlagNames[c.field])
		}
	}
	return nil
}

// applyWebhookFlags sets on o the fields the flags of Flags.Webhook cover.
func applyWebhookFlags(o *webhook.Options, f webhook.Options) {
	o.ReadTimeout = f.ReadTimeout
	o.MaxConnections = f.MaxConnections
	o.MaxConnectionsPerPeer = f.MaxConnectionsPerPeer
	o.HandshakeTimeout = f.HandshakeTimeout
	o.ReadHeaderTimeout = f.ReadHeaderTimeout
	o.MinBodyRate = f.MinBodyRate
	o.MaxAdmissionsInFlight = f.MaxAdmissionsInFlight
	o.MaxInFlightMemory = f.MaxInFlightMemory
	o.MaxRequestBodyBytes = f.MaxRequestBodyBytes
	o.ObjectLimits = f.ObjectLimits
	o.ClientCAFile = f.ClientCAFile
}

// byteQuantity is a flag.Value of a byte count written as a Kubernetes
// quantity: 1048576, 1Mi or 1M.
type byteQuantity struct{ v *int64 }

func (q byteQuantity) String() string {
	if q.v == nil {
		return ""
	}
	return resource.NewQuantity(*q.v, resource.BinarySI).String()
}

func (q byteQuantity) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity of bytes, such as 48Mi", s)
	}
	n, ok := v.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("%q is not a whole, non-negative number of bytes", s)
	}
	*q.v = n
	return nil
}

// probeShutdown bounds the drain of the webhook's own probe server.
const probeShutdown = 5 * time.Second

// serveWebhookProbes serves srv's probes over HTTP on ln until ctx ends,
// for a webhook whose TLS port requires client certificates; ln is closed
// on return. /readyz turns unready with the webhook when ctx ends.
func serveWebhookProbes(ctx context.Context, srv *webhook.Server, ln net.Listener) error {
	hs := &http.Server{Handler: srv.ProbeHandler(), ReadHeaderTimeout: probeShutdown}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("webhook probes: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeShutdown)
	defer cancel()
	err := hs.Shutdown(drain)
	if err != nil {
		hs.Close()
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("webhook probes: serve on %s: %w", ln.Addr(), serr)
	}
	return err
}
