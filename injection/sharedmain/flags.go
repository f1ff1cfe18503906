package sharedmain

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/webhook"
)

// DefaultProbePort is where health probes are served when the process runs
// no webhook (the webhook server serves them otherwise).
const DefaultProbePort = 8080

// AnyPort as Flags.WebhookPort or Flags.ProbePort binds a port the kernel
// picks (port 0), as 0 does on a command line; the process reports the
// port it got (Flags.ListenAddressesFile). Zero, in Flags, is the default
// port, as for every other field.
const AnyPort = -1

// Flags are the settings Main reads from the command line and
// MainWithContext and Run from their context (WithFlags): one field per
// flag. A zero field takes its default, as DefaultFlags shows; Validate
// names the flag of any setting that cannot work.
type Flags struct {
	// Kubeconfig is a kubeconfig file (--kubeconfig). When it and
	// $KUBECONFIG are empty, the in-cluster configuration is used.
	Kubeconfig string
	// Server overrides the API server URL (--server), an http or https URL;
	// empty, the default, keeps the configuration's.
	Server string
	// DisableHA turns leader election off (--disable-ha, default false):
	// every controller is promoted at once, as for a single replica.
	DisableHA bool
	// WebhookAddress is the host the webhook listens on (--webhook-address);
	// empty means all interfaces.
	WebhookAddress string
	// WebhookPort is the webhook's HTTPS port (--webhook-port, default
	// webhook.DefaultPort). AnyPort (--webhook-port=0 on a command line)
	// binds a port the kernel picks, which the process reports (see
	// ListenAddressesFile).
	WebhookPort int
	// WebhookIPSANs are IP addresses added to the serving certificate
	// (--webhook-ip-sans, comma-separated, default none), for a webhook
	// reached by IP out of cluster, e.g. 127.0.0.1.
	WebhookIPSANs []net.IP
	// WebhookGracePeriod is how long the webhook keeps serving, unready,
	// after shutdown begins (--webhook-grace-period, default
	// webhook.DefaultGracePeriod); negative means no wait.
	WebhookGracePeriod time.Duration
	// ProbePort serves /healthz and /readyz over HTTP when no webhook runs,
	// or when the webhook requires client certificates (--probe-port,
	// default DefaultProbePort). AnyPort (--probe-port=0 on a command
	// line) binds a port the kernel picks, which the process reports.
	ProbePort int
	// ListenAddressesFile, when set, is a file the process writes once
	// every listener it runs is bound (--listen-addresses-file, default
	// none): a JSON object naming the address each listens on
	// (ListenAddresses), so a caller that asked for port 0 learns the port
	// the kernel gave. The file is replaced in one rename, so a reader
	// never sees it half written; a caller that starts the process again
	// removes it first, or names another. The same addresses are logged
	// ("listening").
	ListenAddressesFile string

	// KubeAPIQPS is the sustained rate, in requests per second, that each
	// API client of the process may send (--kube-api-qps, default
	// DefaultKubeAPIQPS, see there for why); negative turns client-side
	// throttling off and leaves it to the API server's priority and
	// fairness.
	KubeAPIQPS float64
	// KubeAPIBurst is how many requests each client may send at once
	// before KubeAPIQPS applies (--kube-api-burst, default
	// DefaultKubeAPIBurst).
	KubeAPIBurst int
	// ResyncPeriod is how often the informers hand every object they hold
	// to the controllers again, so that an event missed for any reason is
	// made up for (--resync-period, default DefaultResyncPeriod). It must
	// be at least a second; negative turns resync off (so does
	// --resync-period=0 on a command line).
	ResyncPeriod time.Duration
	// The webhook's certificates and where it is called. A zero duration
	// takes the certificates package's default.
	//
	// WebhookCAValidity is the CA's lifetime (--webhook-ca-validity,
	// default certificates.DefaultCAValidity); WebhookCARotateBefore is how
	// long before its expiry a new CA is published (--webhook-ca-rotate-before,
	// default certificates.DefaultCARotateBefore).
	WebhookCAValidity     time.Duration
	WebhookCARotateBefore time.Duration
	// WebhookCertValidity is the serving certificate's lifetime
	// (--webhook-cert-validity, default
	// certificates.DefaultServingValidity); WebhookCertRotateBefore is how
	// long before its expiry it is renewed (--webhook-cert-rotate-before,
	// default certificates.DefaultServingRotateBefore), and so how long a
	// failed renewal may be retried before the webhook has no valid
	// certificate. They must be ordered: cert rotate-before < cert validity,
	// cert rotate-before < CA rotate-before < CA validity.
	WebhookCertValidity     time.Duration
	WebhookCertRotateBefore time.Duration
	// WebhookKubeNamespaces lets the webhook be called in kube-system,
	// kube-public and kube-node-lease when Bindings there need it
	// (--webhook-kube-namespaces); by default it never is, so a webhook
	// outage cannot block the cluster's own namespaces.
	WebhookKubeNamespaces bool
	// Uninstall runs the process once, in place of its controllers, to
	// remove what bindkit did (--uninstall): every admission controller
	// stops the webhook from being called, then every Binding's subjects
	// are unbound and its finalizer removed (see Uninstaller), and the
	// process exits, 0 when all of it succeeded. Run it with the
	// controller's Deployment deleted, before deleting the rest of the
	// installation, so no namespace or CRD is left waiting on a finalizer.
	Uninstall bool
	// Webhook holds the webhook's bounds on what its callers may send, and
	// its client authentication: the flags --webhook-read-timeout,
	// --webhook-read-header-timeout, --webhook-handshake-timeout,
	// --webhook-min-body-rate, --webhook-max-* and --webhook-client-ca are
	// registered directly on its fields ReadTimeout, ReadHeaderTimeout,
	// HandshakeTimeout, MinBodyRate, MaxConnections, MaxConnectionsPerPeer,
	// MaxAdmissionsInFlight, MaxInFlightMemory, MaxRequestBodyBytes,
	// ObjectLimits and ClientCAFile, which webhook.Options documents with their defaults
	// (a zero field takes the default there). Its other fields are not
	// read: the webhook's address, port, grace period and namespaces have
	// flags of their own above, and what no flag sets comes from the
	// context (webhook.WithOptions) or the webhook package's defaults.
	Webhook webhook.Options

	// DeclarativeAdmission is how the subjects of declarative Binding kinds
	// (package declarative) are admitted (--declarative-admission, default
	// policy.ByPolicy): "policy", by a MutatingAdmissionPolicy the
	// kube-apiserver applies, where it serves one (the webhook otherwise);
	// "webhook", by the webhook, as every other kind. A process whose kinds
	// are all admitted by policy runs no webhook server.
	DeclarativeAdmission policy.Admission

	// MetricsAddress is where the process serves its Prometheus metrics
	// at /metrics, as host:port (--metrics-address, default
	// DefaultMetricsAddress): over HTTPS to callers whose bearer token the
	// kube-apiserver authenticates (a TokenReview) and authorizes to get
	// /metrics (a SubjectAccessReview), unless MetricsInsecure. MetricsOff
	// turns the endpoint off, as an empty --metrics-address does on a
	// command line.
	MetricsAddress string
	// MetricsInsecure serves the metrics over plain HTTP to anyone who
	// reaches the address, with no authentication (--metrics-secure=false;
	// default false: HTTPS, authenticated and authorized). Anyone who
	// reaches the port then reads the process's admission and reconcile
	// activity and its certificates' expiry, and can load it with scrapes.
	MetricsInsecure bool
	// MetricsCertDir is a directory holding the metrics endpoint's serving
	// certificate and key as tls.crt and tls.key, PEM, the keys of a
	// kubernetes.io/tls Secret mounted as a volume (--metrics-cert-dir,
	// default none). The files are read at start, which fails when they
	// cannot be, and again when they change (checked at most every
	// MetricsCertCheckInterval), so a renewed Secret is served without a
	// restart. Empty, the process serves a self-signed certificate it
	// generates in memory at start (renewed before it expires), which a
	// scraper cannot verify.
	MetricsCertDir string
}

// DefaultMetricsAddress is where metrics are served by default: every
// interface, port 9090, on every replica, over HTTPS to authorized
// callers (Flags.MetricsInsecure).
const DefaultMetricsAddress = ":9090"

// MetricsOff as Flags.MetricsAddress serves no metrics (nor keeps any,
// unless the context carries a registry: WithMetricsRegistry).
const MetricsOff = "off"

// DefaultFlags returns the settings of a command line without flags.
func DefaultFlags() Flags {
	return Flags{
		WebhookPort:        webhook.DefaultPort,
		WebhookGracePeriod: webhook.DefaultGracePeriod,
		ProbePort:          DefaultProbePort,

		KubeAPIQPS:              DefaultKubeAPIQPS,
		KubeAPIBurst:            DefaultKubeAPIBurst,
		ResyncPeriod:            DefaultResyncPeriod,
		WebhookCAValidity:       certificates.DefaultCAValidity,
		WebhookCARotateBefore:   certificates.DefaultCARotateBefore,
		WebhookCertValidity:     certificates.DefaultServingValidity,
		WebhookCertRotateBefore: certificates.DefaultServingRotateBefore,
		Webhook:                 defaultWebhookFlags(),
		DeclarativeAdmission:    policy.ByPolicy,
		MetricsAddress:          DefaultMetricsAddress,
	}
}

// defaultWebhookFlags returns webhook.DefaultOptions without its Logger,
// which Run sets from its own: the defaults the flags of Flags.Webhook show.
func defaultWebhookFlags() webhook.Options {
	o := webhook.DefaultOptions()
	o.Logger = nil
	return o
}

func (f Flags) withDefaults() Flags {
	d := DefaultFlags()
	f.WebhookPort = cmp.Or(f.WebhookPort, d.WebhookPort)
	f.WebhookGracePeriod = cmp.Or(f.WebhookGracePeriod, d.WebhookGracePeriod)
	f.ProbePort = cmp.Or(f.ProbePort, d.ProbePort)
	f.KubeAPIQPS = cmp.Or(f.KubeAPIQPS, d.KubeAPIQPS)
	f.KubeAPIBurst = cmp.Or(f.KubeAPIBurst, d.KubeAPIBurst)
	f.ResyncPeriod = cmp.Or(f.ResyncPeriod, d.ResyncPeriod)
	f.WebhookCAValidity = cmp.Or(f.WebhookCAValidity, d.WebhookCAValidity)
	f.WebhookCARotateBefore = cmp.Or(f.WebhookCARotateBefore, d.WebhookCARotateBefore)
	f.WebhookCertValidity = cmp.Or(f.WebhookCertValidity, d.WebhookCertValidity)
	f.WebhookCertRotateBefore = cmp.Or(f.WebhookCertRotateBefore, d.WebhookCertRotateBefore)
	f.DeclarativeAdmission = cmp.Or(f.DeclarativeAdmission, d.DeclarativeAdmission)
	// The webhook package owns its defaults; the Logger stays Run's.
	logger := f.Webhook.Logger
	f.Webhook = f.Webhook.WithDefaults()
	f.Webhook.Logger = logger
	f.MetricsAddress = cmp.Or(f.MetricsAddress, d.MetricsAddress)
	return f
}

// validateCertificates reports certificate lifetimes the certificates
// reconciler cannot work with, naming the flags. f has its defaults.
func (f Flags) validateCertificates() error {
	type flagValue struct {
		name string
		v    time.Duration
	}
	caValidity := flagValue{"webhook-ca-validity", f.WebhookCAValidity}
	caRotate := flagValue{"webhook-ca-rotate-before", f.WebhookCARotateBefore}
	certValidity := flagValue{"webhook-cert-validity", f.WebhookCertValidity}
	certRotate := flagValue{"webhook-cert-rotate-before", f.WebhookCertRotateBefore}
	for _, fv := range []flagValue{caValidity, caRotate, certValidity, certRotate} {
		if fv.v < 0 {
			return fmt.Errorf("--%s %v is negative", fv.name, fv.v)
		}
	}
	// Each order keeps a certificate from being due for rotation the
	// moment it is issued.
	for _, o := range [][2]flagValue{{certRotate, certValidity}, {certRotate, caRotate}, {caRotate, caValidity}} {
		if o[0].v >= o[1].v {
			return fmt.Errorf("--%s %v must be shorter than --%s %v", o[0].name, o[0].v, o[1].name, o[1].v)
		}
	}
	return nil
}

// ParseFlags parses args (without the program name) with a flag set of its
// own, named component; usage and errors go to output (os.Stderr for Main).
// It returns flag.ErrHelp for -h, ErrVersion for --version (whatever the
// other flags) and an error naming the flag for a bad value or a
// positional argument.
func ParseFlags(component string, args []string, output io.Writer) (Flags, error) {
	f := DefaultFlags()
	fs := flag.NewFlagSet(component, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses $KUBECONFIG, else the in-cluster configuration")
	fs.StringVar(&f.Server, "server", "", "API server URL, overriding the kubeconfig's or the in-cluster one")
	fs.BoolVar(&f.DisableHA, "disable-ha", false, "run without leader election: this replica writes as leader at once")
	fs.StringVar(&f.WebhookAddress, "webhook-address", "", "address the webhook listens on; empty means all interfaces")
	fs.IntVar(&f.WebhookPort, "webhook-port", f.WebhookPort, "HTTPS port of the webhook; 0 binds one the kernel picks (see --listen-addresses-file)")
	fs.Func("webhook-ip-sans", "comma-separated IP addresses added to the webhook's serving certificate, e.g. 127.0.0.1", func(s string) error {
		ips, err := parseIPs(s)
		f.WebhookIPSANs = append(f.WebhookIPSANs, ips...)
		return err
	})
	fs.DurationVar(&f.WebhookGracePeriod, "webhook-grace-period", f.WebhookGracePeriod, "how long the webhook keeps serving, unready, after a shutdown signal; negative means none")
	fs.IntVar(&f.ProbePort, "probe-port", f.ProbePort, "HTTP port of /healthz and /readyz when no webhook runs, or when --webhook-client-ca is set; 0 binds one the kernel picks")
	fs.StringVar(&f.ListenAddressesFile, "listen-addresses-file", "", "file to write, once every listener is bound, with the address of each "+
		`as JSON ({"webhook": "127.0.0.1:8443", "probes": ..., "metrics": ...}): how a caller learns the ports a port 0 got`)

	fs.Float64Var(&f.KubeAPIQPS, "kube-api-qps", f.KubeAPIQPS, "sustained requests per second each API client may send; "+
		"high enough that binding thousands of subjects at once is never slowed (the API server's priority and fairness "+
		"protects the server), low enough to cap a runaway loop; negative turns client-side throttling off")
	fs.IntVar(&f.KubeAPIBurst, "kube-api-burst", f.KubeAPIBurst, "requests each API client may send at once before --kube-api-qps applies")
	fs.DurationVar(&f.ResyncPeriod, "resync-period", f.ResyncPeriod, "how often informers replay every object to the controllers, "+
		"so a missed event is made up for; at least 1s, or 0 to turn it off")

	// The webhook's certificates and where it is called.
	fs.DurationVar(&f.WebhookCAValidity, "webhook-ca-validity", f.WebhookCAValidity, "lifetime of the webhook's CA")
	fs.DurationVar(&f.WebhookCARotateBefore, "webhook-ca-rotate-before", f.WebhookCARotateBefore, "how long before the CA expires a new CA is published next to it")
	fs.DurationVar(&f.WebhookCertValidity, "webhook-cert-validity", f.WebhookCertValidity, "lifetime of the webhook's serving certificate")
	fs.DurationVar(&f.WebhookCertRotateBefore, "webhook-cert-rotate-before", f.WebhookCertRotateBefore, "how long before the serving certificate expires it is renewed; a failed renewal is retried until then")
	fs.BoolVar(&f.WebhookKubeNamespaces, "webhook-kube-namespaces", false, "let the webhook be called in kube-system, kube-public and kube-node-lease when Bindings there need it")
	registerWebhookFlags(fs, &f.Webhook)
	fs.BoolVar(&f.Uninstall, "uninstall", false, "remove what bindkit did and exit: stop the webhook from being called, unbind every subject, "+
		"release every Binding's finalizer; run it after deleting the controller's Deployment, before deleting the rest of the installation")

	fs.Func("declarative-admission", `how subjects of declarative Binding kinds are admitted: "policy", by a MutatingAdmissionPolicy the kube-apiserver applies `+
		`(the webhook where it serves none), or "webhook" (default "policy")`, func(s string) error {
		f.DeclarativeAdmission = policy.Admission(s)
		return f.DeclarativeAdmission.Validate()
	})

	// Observability.
	fs.StringVar(&f.MetricsAddress, "metrics-address", f.MetricsAddress, "host:port where Prometheus metrics are served at /metrics; empty turns them off")
	fs.BoolFunc("metrics-secure", "serve metrics over HTTPS to callers whose bearer token the kube-apiserver authenticates and authorizes to get /metrics "+
		"(a TokenReview and a SubjectAccessReview); false serves them over plain HTTP to anyone who reaches --metrics-address (default true)", func(s string) error {
		secure, err := strconv.ParseBool(s)
		f.MetricsInsecure = !secure
		return err
	})
	fs.StringVar(&f.MetricsCertDir, "metrics-cert-dir", "", "directory with the metrics endpoint's certificate and key, tls.crt and tls.key (a mounted kubernetes.io/tls Secret), "+
		"read again when they change; empty serves a self-signed certificate generated at start")

	version := fs.Bool("version", false, "print the module version and VCS revision the binary was built from, and exit")

	if err := fs.Parse(args); err != nil {
		return Flags{}, err
	}
	if *version {
		return Flags{}, ErrVersion
	}
	if fs.NArg() > 0 {
		return Flags{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// Flags start from DefaultFlags, so a zero here was given: on a
	// command line, as for client-go's informers, a zero resync means none.
	if f.ResyncPeriod == 0 {
		f.ResyncPeriod = -1
	}
	// Likewise an empty metrics address turns the endpoint off, and port
	// 0 asks the kernel for a port, as in any host:port.
	if f.MetricsAddress == "" {
		f.MetricsAddress = MetricsOff
	}
	for _, p := range []struct {
		name string
		port *int
	}{{"webhook-port", &f.WebhookPort}, {"probe-port", &f.ProbePort}} {
		switch {
		case *p.port == 0:
			*p.port = AnyPort
		case *p.port < 0:
			return Flags{}, fmt.Errorf("--%s %d out of range 0-65535 (0 binds a port the kernel picks)", p.name, *p.port)
		}
	}
	// Other zeros given on the command line are mistakes, not defaults.
	if err := f.validate(); err != nil {
		return Flags{}, err
	}
	return f, nil
}

// Validate reports every setting that cannot work, each in an error that
// names its flag. Zero fields are valid: they take their defaults. Run
// calls it.
func (f Flags) Validate() error {
	return f.withDefaults().validate()
}

func (f Flags) validate() error {
	var errs []error
	if f.Server != "" {
		if u, err := url.Parse(f.Server); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--server %q: not an http or https URL with a host", f.Server))
		}
	}
	if a := f.WebhookAddress; a != "" && net.ParseIP(a) == nil && len(validation.IsDNS1123Subdomain(a)) > 0 {
		errs = append(errs, fmt.Errorf("--webhook-address %q: not an IP address or host name (the port is --webhook-port)", a))
	}
	for _, p := range []struct {
		name string
		port int
	}{{"webhook-port", f.WebhookPort}, {"probe-port", f.ProbePort}} {
		if p.port != AnyPort && (p.port < 1 || p.port > 65535) {
			errs = append(errs, fmt.Errorf("--%s %d out of range 0-65535 (0 binds a port the kernel picks)", p.name, p.port))
		}
	}

	switch q := f.KubeAPIQPS; {
	case math.IsNaN(q) || math.IsInf(q, 0) || q > math.MaxFloat32:
		errs = append(errs, fmt.Errorf("--kube-api-qps %v: not a finite number of requests per second", q))
	case q == 0:
		errs = append(errs, errors.New("--kube-api-qps 0: must be positive, or negative to turn client-side throttling off"))
	}
	if f.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst %d: must be at least 1", f.KubeAPIBurst))
	}
	if f.ResyncPeriod > 0 && f.ResyncPeriod < time.Second {
		errs = append(errs, fmt.Errorf("--resync-period %s: below the minimum of 1s", f.ResyncPeriod))
	}
	if err := f.withDefaults().validateCertificates(); err != nil {
		errs = append(errs, err)
	}
	if err := validateWebhookFlags(f.Webhook); err != nil {
		errs = append(errs, err)
	}
	if err := validateMetricsAddress(f.MetricsAddress); err != nil {
		errs = append(errs, err)
	}
	if f.MetricsInsecure && f.MetricsCertDir != "" {
		errs = append(errs, fmt.Errorf("--metrics-cert-dir %q: plain HTTP (--metrics-secure=false) serves no certificate", f.MetricsCertDir))
	}
	if err := f.DeclarativeAdmission.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--declarative-admission: %w", err))
	}
	return errors.Join(errs...)
}

func parseIPs(s string) ([]net.IP, error) {
	var out []net.IP
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ip := net.ParseIP(part)
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", part)
		}
		out = append(out, ip)
	}
	return out, nil
}

type (
	flagsKey     struct{}
	logLevelKey  struct{}
	logOutputKey struct{}
)

// WithFlags returns a copy of ctx from which Run (and MainWithContext) take
// their settings. Without it they use DefaultFlags.
func WithFlags(ctx context.Context, f Flags) context.Context {
	return context.WithValue(ctx, flagsKey{}, f)
}

func flagsFrom(ctx context.Context) Flags {
	f, _ := ctx.Value(flagsKey{}).(Flags)
	return f.withDefaults()
}

// WithLogLevel returns a copy of ctx that makes Run log at
// level, which it then sets from the config-logging ConfigMap. The caller
// keeps the handle, so it can read the level the process runs at. Without
// it Run makes its own, starting at info.
func WithLogLevel(ctx context.Context, level zap.AtomicLevel) context.Context {
	return context.WithValue(ctx, logLevelKey{}, level)
}

// WithLogOutput returns a copy of ctx that makes Run write its
// JSON log lines to w instead of os.Stderr. w must be safe for concurrent
// use (zapcore.Lock makes it so).
func WithLogOutput(ctx context.Context, w zapcore.WriteSyncer) context.Context {
	return context.WithValue(ctx, logOutputKey{}, w)
}

// validateMetricsAddress checks --metrics-address: host:port with a port
// number (0 picks a free one), or MetricsOff.
func validateMetricsAddress(a string) error {
	if a == MetricsOff || a == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("--metrics-address %q: not host:port (empty turns metrics off)", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--metrics-address %q: port %q is not a number in 0-65535", a, port)
	}
	return nil
}
