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
	"github.com/bindkit/bindkit/webhook"
)

// CertificatesControllerName names the controller that keeps the webhook's
// certificates Secret, in logs and among the Impls leader election moves.
const CertificatesControllerName = "certificates"

// admissionControllers returns the reconcilers of impls that are also
// admission controllers, in constructor order.
func admissionControllers(impls []*controller.Impl) []webhook.AdmissionController {
	var out []webhook.AdmissionController
	for _, impl := range impls {
		if ac, ok := impl.Reconciler().(webhook.AdmissionController); ok {
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

// withWebhookOptions returns ctx carrying the one description of the
// webhook (webhook.WithOptions) that the server, the certificates
// reconciler and every admission controller of the process read: the
// Secret, its keys, the Service, where the webhook may be called, and the
// bounds on what it reads (WebhookBounds). It
// must be stored before the controller constructors run.
//
// Options a caller stored in ctx with webhook.WithOptions, as a knative
// main does (webhook.Options{ServiceName, SecretName, Port}), are the
// starting point: what no flag sets (ServiceName, SecretName, Keys,
// TLSMinVersion, EnableHTTP2) is kept, and what a flag sets comes from the
// flag, with a warning when that overrides a different value the caller
// gave.
func withWebhookOptions(ctx context.Context, f Flags, logger *zap.Logger) context.Context {
	given, _ := webhook.OptionsFrom(ctx)
	opts := given
	opts.Address = f.WebhookAddress
	opts.Port = f.WebhookPort
	opts.GracePeriod = f.WebhookGracePeriod
	opts.CallInKubeNamespaces = f.WebhookKubeNamespaces
	opts.Logger = logger.Named("webhook")
	f.WebhookBounds.apply(&opts)
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
	return webhook.WithOptions(ctx, opts)
}

// newWebhook builds the certificates controller for the webhook's Secret
// and the webhook server routing to admission, both from the options in
// ctx (withWebhookOptions). Both read the Secret through the system
// namespace's informer, which they request here and which therefore must
// start afterwards. The admission controllers that publish the CA bundle
// (certificates.Publisher) are the ones the certificates reconciler waits
// for before it signs under a new CA.
//
// component is the field manager of the Secret's writes. With m, the
// server counts its admissions and the certificates reconciler reports
// expiry times and rotations there.
func newWebhook(ctx context.Context, namespace, component string, f Flags, logger *zap.Logger, m *metrics.Metrics, admission []webhook.AdmissionController) (*controller.Impl, *webhook.Server, error) {
	if err := f.validateCertificates(); err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: %w", err)
	}
	opts := webhook.GetOptions(ctx)
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
	certOptions := []certificates.ReconcilerOption{
		certificates.WithLister(secrets.Lister()),
		certificates.WithEnqueueAfter(impl.EnqueueKeyAfter),
		certificates.WithPublishers(publishers...),
		certificates.WithLogger(logger.Named(CertificatesControllerName)),
		certificates.WithFieldManager(component),
	}
	if m != nil {
		certOptions = append(certOptions, certificates.WithObserver(m.Certificates()))
		if opts.Observer == nil {
			opts.Observer = m.Admission()
		}
	}
	certs, err := certificates.NewReconciler(injection.KubeClient(ctx), certOpts, certOptions...)
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

// WebhookBounds are the webhook's bounds on what its callers may send, and
// its client authentication: the flags --webhook-read-timeout,
// --webhook-max-* and --webhook-client-ca. A zero field takes the webhook
// package's default (see webhook.Options and webhook.ObjectLimits, and
// the README for the list).
type WebhookBounds struct {
	// ReadTimeout is webhook.Options.ReadTimeout (--webhook-read-timeout).
	ReadTimeout time.Duration
	// MaxConnections is webhook.Options.MaxConnections
	// (--webhook-max-connections).
	MaxConnections int
	// MaxAdmissionsInFlight is webhook.Options.MaxAdmissionsInFlight
	// (--webhook-max-in-flight).
	MaxAdmissionsInFlight int
	// MaxInFlightMemory is webhook.Options.MaxInFlightMemory
	// (--webhook-max-in-flight-memory, a quantity such as 48Mi).
	MaxInFlightMemory int64
	// MaxRequestBodyBytes is webhook.Options.MaxRequestBodyBytes
	// (--webhook-max-request-body-bytes, a quantity such as 7Mi).
	MaxRequestBodyBytes int64
	// Objects are webhook.Options.ObjectLimits: --webhook-max-object-depth,
	// --webhook-max-containers, --webhook-max-volumes, --webhook-max-env,
	// --webhook-max-volume-mounts and --webhook-max-patch-bytes.
	Objects webhook.ObjectLimits
	// ClientCAFile is webhook.Options.ClientCAFile (--webhook-client-ca):
	// when set, only callers with a client certificate signed by a CA in
	// the file reach the webhook, and the probes are served over HTTP on
	// --probe-port as well, since a kubelet's probe has no certificate.
	ClientCAFile string
}

// DefaultWebhookBounds returns the bounds of a command line without flags.
func DefaultWebhookBounds() WebhookBounds {
	d := webhook.DefaultOptions()
	return WebhookBounds{
		ReadTimeout:           d.ReadTimeout,
		MaxConnections:        d.MaxConnections,
		MaxAdmissionsInFlight: d.MaxAdmissionsInFlight,
		MaxInFlightMemory:     d.MaxInFlightMemory,
		MaxRequestBodyBytes:   d.MaxRequestBodyBytes,
		Objects:               d.ObjectLimits,
	}
}

func (b *WebhookBounds) register(fs *flag.FlagSet) {
	fs.DurationVar(&b.ReadTimeout, "webhook-read-timeout", b.ReadTimeout, "longest time to read one admission request, headers and body; the request's own timeout shortens it")
	fs.IntVar(&b.MaxConnections, "webhook-max-connections", b.MaxConnections, "connections the webhook holds open at once; at the cap the longest idle one is closed, or new ones wait")
	fs.IntVar(&b.MaxAdmissionsInFlight, "webhook-max-in-flight", b.MaxAdmissionsInFlight, "admissions decided at once; more are answered 429 with Retry-After")
	fs.Var(byteQuantity{&b.MaxInFlightMemory}, "webhook-max-in-flight-memory", "estimated memory admissions in flight may hold together (a quantity, e.g. 48Mi); beyond it requests are answered 429")
	fs.Var(byteQuantity{&b.MaxRequestBodyBytes}, "webhook-max-request-body-bytes", "largest admission request body (a quantity, e.g. 7Mi); larger ones are answered 413")
	fs.IntVar(&b.Objects.MaxDepth, "webhook-max-object-depth", b.Objects.MaxDepth, "deepest nesting of objects and arrays in an admitted object")
	fs.IntVar(&b.Objects.MaxContainers, "webhook-max-containers", b.Objects.MaxContainers, "most containers, init containers or ephemeral containers in an admitted pod template")
	fs.IntVar(&b.Objects.MaxVolumes, "webhook-max-volumes", b.Objects.MaxVolumes, "most volumes in an admitted pod template")
	fs.IntVar(&b.Objects.MaxEnv, "webhook-max-env", b.Objects.MaxEnv, "most env (or envFrom) entries of one container of an admitted pod template")
	fs.IntVar(&b.Objects.MaxVolumeMounts, "webhook-max-volume-mounts", b.Objects.MaxVolumeMounts, "most volumeMounts of one container of an admitted pod template")
	fs.Var(byteQuantity{&b.Objects.MaxPatchBytes}, "webhook-max-patch-bytes", "largest JSON patch the webhook answers with (a quantity, e.g. 1Mi)")
	fs.StringVar(&b.ClientCAFile, "webhook-client-ca", b.ClientCAFile, "PEM file of CAs whose client certificates may call the webhook; empty lets any caller in. When set, probes are also served over HTTP on --probe-port")
}

// validate reports the first negative bound, naming its flag.
func (b WebhookBounds) validate() error {
	for _, c := range []struct {
		flag string
		v    int64
	}{
		{"webhook-read-timeout", int64(b.ReadTimeout)},
		{"webhook-max-connections", int64(b.MaxConnections)},
		{"webhook-max-in-flight", int64(b.MaxAdmissionsInFlight)},
		{"webhook-max-object-depth", int64(b.Objects.MaxDepth)},
		{"webhook-max-containers", int64(b.Objects.MaxContainers)},
		{"webhook-max-volumes", int64(b.Objects.MaxVolumes)},
		{"webhook-max-env", int64(b.Objects.MaxEnv)},
		{"webhook-max-volume-mounts", int64(b.Objects.MaxVolumeMounts)},
	} {
		if c.v < 0 {
			return fmt.Errorf("--%s must not be negative", c.flag)
		}
	}
	return nil
}

// withDefaults fills zero fields with DefaultWebhookBounds.
func (b WebhookBounds) withDefaults() WebhookBounds {
	d := DefaultWebhookBounds()
	zero := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	zero64 := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	if b.ReadTimeout == 0 {
		b.ReadTimeout = d.ReadTimeout
	}
	zero(&b.MaxConnections, d.MaxConnections)
	zero(&b.MaxAdmissionsInFlight, d.MaxAdmissionsInFlight)
	zero64(&b.MaxInFlightMemory, d.MaxInFlightMemory)
	zero64(&b.MaxRequestBodyBytes, d.MaxRequestBodyBytes)
	zero(&b.Objects.MaxDepth, d.Objects.MaxDepth)
	zero(&b.Objects.MaxContainers, d.Objects.MaxContainers)
	zero(&b.Objects.MaxVolumes, d.Objects.MaxVolumes)
	zero(&b.Objects.MaxEnv, d.Objects.MaxEnv)
	zero(&b.Objects.MaxVolumeMounts, d.Objects.MaxVolumeMounts)
	zero64(&b.Objects.MaxPatchBytes, d.Objects.MaxPatchBytes)
	return b
}

// apply sets the bounds on o.
func (b WebhookBounds) apply(o *webhook.Options) {
	o.ReadTimeout = b.ReadTimeout
	o.MaxConnections = b.MaxConnections
	o.MaxAdmissionsInFlight = b.MaxAdmissionsInFlight
	o.MaxInFlightMemory = b.MaxInFlightMemory
	o.MaxRequestBodyBytes = b.MaxRequestBodyBytes
	o.ObjectLimits = b.Objects
	o.ClientCAFile = b.ClientCAFile
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
