package webhook

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/certificates"
)

// Defaults of Options.
const (
	DefaultPort        = 8443
	DefaultServiceName = "webhook"
	DefaultSecretName  = "webhook-certs"
	// DefaultGracePeriod covers the time the endpoints controller and every
	// kube-proxy or kube-apiserver need to stop sending to a pod that turned
	// unready.
	DefaultGracePeriod = 15 * time.Second
	// DefaultMaxRequestBodyBytes fits an AdmissionReview of an UPDATE whose
	// object and oldObject are each at etcd's 3 MiB limit, with room for the
	// envelope.
	DefaultMaxRequestBodyBytes = 7 << 20
	// DefaultReadinessTimeout is the longest an admission waits for its
	// controller's informers before it fails with 503.
	DefaultReadinessTimeout = 10 * time.Second
	// DefaultReadTimeout is the kube-apiserver's longest webhook timeout:
	// a request still arriving after it has no caller left.
	DefaultReadTimeout = 30 * time.Second
	// DefaultMaxConnections is far more than the kube-apiserver opens to one
	// webhook replica, and at the tens of KiB each holds, a bounded share of
	// the process's memory.
	DefaultMaxConnections = 1000
	// DefaultMaxConnectionsPerPeer is twice the admissions a replica
	// decides at once (DefaultMaxAdmissionsInFlight), and a quarter of
	// DefaultMaxConnections, so one address cannot hold them all. A
	// kube-apiserver meets it only while it holds the idle connections of
	// clients it dropped (up to 25 for 90 seconds after each change of the
	// caBundle), which are then the ones closed.
	DefaultMaxConnectionsPerPeer = 256
	// DefaultHandshakeTimeout bounds a TLS handshake: a few round trips,
	// which take milliseconds inside a cluster.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultReadHeaderTimeout bounds a request's headers, which the
	// kube-apiserver sends at once.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultMinBodyRate is the slowest pace, in bytes a second, at which a
	// body may arrive after its first ReadHeaderTimeout: a largest body
	// (DefaultMaxRequestBodyBytes) at this pace takes about the longest
	// webhook timeout, and a peer that trickles a body must send this much
	// a second for every connection it holds.
	DefaultMinBodyRate = 256 << 10
	// DefaultMaxAdmissionsInFlight is far more than a replica on a core or
	// two decides at once; beyond it requests are answered 429 at once.
	DefaultMaxAdmissionsInFlight = 128
	// DefaultMaxInFlightMemory is the memory budget of admissions in
	// flight: their bodies, decoded objects, copies and answers, as
	// estimated before each is allocated. With the garbage collector's
	// headroom and the connections' buffers, default options keep the
	// process within about 150 MiB of its resting size, whatever arrives.
	DefaultMaxInFlightMemory = 48 << 20
)

// Options configure a Server. DefaultOptions returns them filled in; New
// replaces every zero field by its default, so a caller sets only what it
// changes.
type Options struct {
	// Address is the host to listen on for Run; empty means all interfaces.
	Address string
	// Port is the HTTPS port for Run (default DefaultPort).
	Port int
	// ServiceName is the Service in front of the webhook (default
	// DefaultServiceName). The server does not use it; CertificateOptions
	// turns it into the serving certificate's DNS names.
	ServiceName string
	// SecretName is the Secret holding the serving certificate (default
	// DefaultSecretName); the SecretGetter given to New looks it up.
	SecretName string
	// Keys names the Secret's data entries; empty names take
	// certificates.DefaultDataKeys. The server reads ServerCert and ServerKey.
	Keys certificates.DataKeys
	// TLSMinVersion is tls.VersionTLS13 (the default) or tls.VersionTLS12.
	TLSMinVersion uint16
	// EnableHTTP2 turns HTTP/2 on. It is off by default: the kube-apiserver
	// speaks HTTP/1.1 to webhooks well, and HTTP/2 has had
	// denial-of-service weaknesses (rapid reset) a webhook need not carry.
	EnableHTTP2 bool
	// GracePeriod is how long the server keeps serving, unready, after its
	// context ends, before it drains (default DefaultGracePeriod). Each
	// connection closes after its next answer in that time, none while
	// idle. It ends early when every controller has left the
	// kube-apiserver's path (PathLeaver). A negative value means no wait,
	// and no controller is asked to leave.
	GracePeriod time.Duration
	// MaxRequestBodyBytes bounds a request body; larger requests get 413
	// (default DefaultMaxRequestBodyBytes).
	MaxRequestBodyBytes int64
	// ReadinessTimeout bounds how long an admission waits for its
	// controller to sync (default DefaultReadinessTimeout).
	ReadinessTimeout time.Duration
	// CallInKubeNamespaces lets admission controllers ask the kube-apiserver
	// to call the webhook in kube-system, kube-public and kube-node-lease
	// too, where Bindings there need it. Off by default: an outage of the
	// webhook must not block the cluster's own namespaces. The server does
	// not read it; admission controllers read it through GetOptions.
	CallInKubeNamespaces bool
	// DeclarativeByWebhook keeps declarative Binding kinds, which their
	// admission controllers would otherwise hand to a
	// MutatingAdmissionPolicy of the kube-apiserver, on the webhook
	// (sharedmain's --declarative-admission=webhook). The server does not
	// read it; admission controllers read it through GetOptions.
	DeclarativeByWebhook bool
	// ReadTimeout bounds reading one request, headers and body (default
	// DefaultReadTimeout); a request's ?timeout= (the webhook's
	// timeoutSeconds, which the kube-apiserver sends) shortens it. A body
	// not received in time is answered 408. Writing the answer must end
	// within twice ReadTimeout of the request's headers.
	ReadTimeout time.Duration
	// MaxConnections caps the connections held open at once (default
	// DefaultMaxConnections). A new connection is always accepted at
	// once. At the cap, one from a proven address (one that has sent an
	// admission, or with ClientCAFile set completed a handshake, since
	// the server started) or from an address holding fewer than 8
	// connections closes another: the connection in a stage of a request
	// with the least time left before its handshake, headers or body pace
	// would end it anyway (see HandshakeTimeout, ReadHeaderTimeout,
	// MinBodyRate), unless it entered that stage within the last second
	// while a kept-alive connection has been idle for a second: then the
	// kept-alive connection idle longest. One from another address is
	// reset before any TLS, which spares the handshakes that cut peers'
	// reconnections would cost (and so is it below the cap while that
	// address's handshakes fail). Connections deciding an admission are
	// never closed; with ClientCAFile set, connections still in their
	// handshake come before authenticated ones in the order of deadlines.
	// Only when every connection is deciding does a new one wait.
	MaxConnections int
	// MaxConnectionsPerPeer caps the connections held open from one IP
	// address (default DefaultMaxConnectionsPerPeer; at most
	// MaxConnections). At it, a new connection from a proven address
	// closes one of that address's, chosen as at MaxConnections, so a
	// peer flooding the port from the kube-apiserver's address cuts its
	// own (if all of them are deciding, the new one waits); one from an
	// unproven address is reset before any TLS.
	MaxConnectionsPerPeer int
	// HandshakeTimeout bounds a connection's TLS handshake from its
	// accept (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// ReadHeaderTimeout bounds a request's headers, from the handshake or
	// from the first bytes of a request on a kept-alive connection
	// (default DefaultReadHeaderTimeout, at most ReadTimeout); a body then
	// has as long again to start arriving.
	ReadHeaderTimeout time.Duration
	// MinBodyRate is the slowest average pace, in bytes a second, at which
	// a body may arrive once its first ReadHeaderTimeout has passed
	// (default DefaultMinBodyRate): a body of n bytes must be in within
	// ReadHeaderTimeout + n/MinBodyRate of its headers, and ReadTimeout
	// still bounds it. A body that falls behind is answered 408.
	MinBodyRate int64
	// MaxAdmissionsInFlight caps the admissions being decided at once
	// (default DefaultMaxAdmissionsInFlight); one more is answered 429 with
	// Retry-After at once, which the kube-apiserver retries.
	MaxAdmissionsInFlight int
	// MaxInFlightMemory is the memory budget, in bytes, of admissions in
	// flight (default DefaultMaxInFlightMemory). Each request reserves
	// memory as its body arrives (its buffers and the decoded review's
	// copy: up to three times its length, plus a little) and before its
	// object is decoded (see Reserve). A request that finds no room is
	// answered 429 with Retry-After. It must hold at least two bodies of
	// MaxRequestBodyBytes.
	MaxInFlightMemory int64
	// ObjectLimits bound the object of each request (see ObjectLimits);
	// zero fields take their defaults.
	ObjectLimits ObjectLimits
	// ClientCAFile, when set, makes the server require a TLS client
	// certificate signed by a CA in this PEM file, which is re-read when it
	// changes; a client without one is refused during the TLS handshake.
	// The kube-apiserver presents one when its AdmissionConfiguration gives
	// it a kubeconfig for the webhook. Off by default. Probes over HTTPS
	// then need a certificate too, so serve ProbeHandler on another port.
	ClientCAFile string
	// Logger receives request logs at debug level and errors (default:
	// none). Object bodies and keys are never logged.
	Logger *zap.Logger
	// SettingNames are the names users set the settings above by, keyed by
	// the Options field's name (for example "MaxAdmissionsInFlight", or
	// "ObjectLimits.MaxEnv"), for the answers that tell a refused caller
	// which bound refused it: injection/sharedmain maps each field to its
	// command-line flag. A field without an entry is named
	// "Options.<field>". Default: none.
	SettingNames map[string]string
	// Observer, if set, is told the outcome, duration and patch size of
	// every request routed to a controller (see Observer); package metrics
	// turns that into Prometheus metrics. Default: none.
	Observer Observer
}

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	return Options{
		Port:                  DefaultPort,
		ServiceName:           DefaultServiceName,
		SecretName:            DefaultSecretName,
		Keys:                  certificates.DefaultDataKeys(),
		TLSMinVersion:         tls.VersionTLS13,
		GracePeriod:           DefaultGracePeriod,
		MaxRequestBodyBytes:   DefaultMaxRequestBodyBytes,
		ReadinessTimeout:      DefaultReadinessTimeout,
		ReadTimeout:           DefaultReadTimeout,
		MaxConnections:        DefaultMaxConnections,
		MaxConnectionsPerPeer: DefaultMaxConnectionsPerPeer,
		HandshakeTimeout:      DefaultHandshakeTimeout,
		ReadHeaderTimeout:     DefaultReadHeaderTimeout,
		MinBodyRate:           DefaultMinBodyRate,
		MaxAdmissionsInFlight: DefaultMaxAdmissionsInFlight,
		MaxInFlightMemory:     DefaultMaxInFlightMemory,
		ObjectLimits:          DefaultObjectLimits(),
		Logger:                zap.NewNop(),
	}
}

// WithDefaults returns o with every zero field replaced by its default, as
// DefaultOptions shows; it checks nothing (New does, and reports what it
// cannot honour). A caller that registers command-line flags on Options'
// fields uses it to show and compare the values a server would run with.
func (o Options) WithDefaults() Options {
	o, _ = o.withDefaults()
	return o
}

// withDefaults fills zero fields and rejects values the server cannot honour.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	// cmp.Or keeps a set field, negative ones included: a negative grace
	// period stays negative (no wait) rather than turning into 0, which a
	// second pass (GetOptions, then New) would read as "default".
	o.Port = cmp.Or(o.Port, d.Port)
	o.ServiceName = cmp.Or(o.ServiceName, d.ServiceName)
	o.SecretName = cmp.Or(o.SecretName, d.SecretName)
	o.Keys = o.Keys.WithDefaults()
	o.TLSMinVersion = cmp.Or(o.TLSMinVersion, d.TLSMinVersion)
	o.GracePeriod = cmp.Or(o.GracePeriod, d.GracePeriod)
	o.MaxRequestBodyBytes = cmp.Or(o.MaxRequestBodyBytes, d.MaxRequestBodyBytes)
	o.ReadinessTimeout = cmp.Or(o.ReadinessTimeout, d.ReadinessTimeout)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	o.ReadTimeout = cmp.Or(o.ReadTimeout, d.ReadTimeout)
	o.MaxConnections = cmp.Or(o.MaxConnections, d.MaxConnections)
	o.MaxConnectionsPerPeer = cmp.Or(o.MaxConnectionsPerPeer, d.MaxConnectionsPerPeer)
	o.HandshakeTimeout = cmp.Or(o.HandshakeTimeout, d.HandshakeTimeout)
	o.ReadHeaderTimeout = cmp.Or(o.ReadHeaderTimeout, d.ReadHeaderTimeout)
	o.MinBodyRate = cmp.Or(o.MinBodyRate, d.MinBodyRate)
	o.MaxAdmissionsInFlight = cmp.Or(o.MaxAdmissionsInFlight, d.MaxAdmissionsInFlight)
	o.MaxInFlightMemory = cmp.Or(o.MaxInFlightMemory, d.MaxInFlightMemory)
	var err error
	if o.ObjectLimits, err = o.ObjectLimits.withDefaults(); err != nil {
		return o, err
	}
	switch {
	case o.Port < 0 || o.Port > 65535:
		return o, fmt.Errorf("webhook: port %d out of range", o.Port)
	case o.TLSMinVersion != tls.VersionTLS12 && o.TLSMinVersion != tls.VersionTLS13:
		return o, fmt.Errorf("webhook: TLS minimum version %s not allowed; want TLS 1.2 or 1.3", tls.VersionName(o.TLSMinVersion))
	case o.MaxRequestBodyBytes < 0:
		return o, fmt.Errorf("webhook: MaxRequestBodyBytes %d is negative", o.MaxRequestBodyBytes)
	case o.ReadinessTimeout < 0:
		return o, fmt.Errorf("webhook: ReadinessTimeout %v is negative", o.ReadinessTimeout)
	case o.ReadTimeout < 0:
		return o, fmt.Errorf("webhook: ReadTimeout %v is negative", o.ReadTimeout)
	case o.MaxConnections < 0:
		return o, fmt.Errorf("webhook: MaxConnections %d is negative", o.MaxConnections)
	case o.MaxConnectionsPerPeer < 0:
		return o, fmt.Errorf("webhook: MaxConnectionsPerPeer %d is negative", o.MaxConnectionsPerPeer)
	case o.HandshakeTimeout < 0:
		return o, fmt.Errorf("webhook: HandshakeTimeout %v is negative", o.HandshakeTimeout)
	case o.ReadHeaderTimeout < 0:
		return o, fmt.Errorf("webhook: ReadHeaderTimeout %v is negative", o.ReadHeaderTimeout)
	case o.MinBodyRate < 0:
		return o, fmt.Errorf("webhook: MinBodyRate %d is negative", o.MinBodyRate)
	case o.MaxAdmissionsInFlight < 0:
		return o, fmt.Errorf("webhook: MaxAdmissionsInFlight %d is negative", o.MaxAdmissionsInFlight)
	case o.MaxInFlightMemory < 2*bodyReservation(o.MaxRequestBodyBytes):
		return o, fmt.Errorf("webhook: MaxInFlightMemory %s holds fewer than two requests of MaxRequestBodyBytes %s; want at least %s",
			formatBytes(o.MaxInFlightMemory), formatBytes(o.MaxRequestBodyBytes), formatBytes(2*bodyReservation(o.MaxRequestBodyBytes)))
	}
	return o, nil
}

// SettingName returns how users set the Options field named field (see
// SettingNames).
func (o Options) SettingName(field string) string {
	if n, ok := o.SettingNames[field]; ok {
		return n
	}
	return "Options." + field
}

// CertificateOptions returns the certificates.Options that make the serving
// certificate this server expects: the same Secret and data keys, and DNS
// names for ServiceName in namespace. Callers add IP addresses, lifetimes
// and webhook configuration names as they need.
func (o Options) CertificateOptions(namespace string) certificates.Options {
	// Only the fields read here take their defaults; New applies the rest.
	d := DefaultOptions()
	if o.ServiceName == "" {
		o.ServiceName = d.ServiceName
	}
	if o.SecretName == "" {
		o.SecretName = d.SecretName
	}
	return certificates.Options{
		SecretName:  o.SecretName,
		Namespace:   namespace,
		ServiceName: o.ServiceName,
		Keys:        o.Keys.WithDefaults(),
	}
}
