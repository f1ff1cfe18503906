package webhook

import (
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
	// context ends, before it drains (default DefaultGracePeriod). A
	// negative value means no wait.
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
	// Logger receives request logs at debug level and errors (default:
	// none). Object bodies and keys are never logged.
	Logger *zap.Logger
}

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	return Options{
		Port:                DefaultPort,
		ServiceName:         DefaultServiceName,
		SecretName:          DefaultSecretName,
		Keys:                certificates.DefaultDataKeys(),
		TLSMinVersion:       tls.VersionTLS13,
		GracePeriod:         DefaultGracePeriod,
		MaxRequestBodyBytes: DefaultMaxRequestBodyBytes,
		ReadinessTimeout:    DefaultReadinessTimeout,
		Logger:              zap.NewNop(),
	}
}

// withDefaults fills zero fields and rejects values the server cannot honour.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.Port == 0 {
		o.Port = d.Port
	}
	if o.ServiceName == "" {
		o.ServiceName = d.ServiceName
	}
	if o.SecretName == "" {
		o.SecretName = d.SecretName
	}
	o.Keys = o.Keys.WithDefaults()
	if o.TLSMinVersion == 0 {
		o.TLSMinVersion = d.TLSMinVersion
	}
	if o.GracePeriod == 0 {
		o.GracePeriod = d.GracePeriod
	} else if o.GracePeriod < 0 {
		o.GracePeriod = 0
	}
	if o.MaxRequestBodyBytes == 0 {
		o.MaxRequestBodyBytes = d.MaxRequestBodyBytes
	}
	if o.ReadinessTimeout == 0 {
		o.ReadinessTimeout = d.ReadinessTimeout
	}
	if o.Logger == nil {
		o.Logger = d.Logger
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
	}
	return o, nil
}

// CertificateOptions returns the certificates.Options that make the serving
// certificate this server expects: the same Secret and data keys, and DNS
// names for ServiceName in namespace. Callers add IP addresses, lifetimes
// and webhook configuration names as they need.
func (o Options) CertificateOptions(namespace string) certificates.Options {
	o, _ = o.withDefaults()
	return certificates.Options{
		SecretName:  o.SecretName,
		Namespace:   namespace,
		ServiceName: o.ServiceName,
		Keys:        o.Keys,
	}
}
