package certificates

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Default lifetimes. A one-year CA rarely changes while a one-week serving
// certificate limits how long a leaked serving key is useful; the rotation
// margins leave the whole margin for a retry after a failed update.
const (
	DefaultCAValidity          = 365 * 24 * time.Hour
	DefaultCARotateBefore      = 30 * 24 * time.Hour
	DefaultServingValidity     = 7 * 24 * time.Hour
	DefaultServingRotateBefore = 24 * time.Hour
	// DefaultTrustDelay is how long the Reconciler waits, once every
	// Publisher carries a new CA, before it signs a serving certificate
	// under it: time for each kube-apiserver's own cache of the webhook
	// configuration to catch up with the object, which a watch delivers
	// within a second even on a busy control plane.
	DefaultTrustDelay = 5 * time.Second
	// MaxRetryInterval caps the default RetryInterval.
	MaxRetryInterval = 30 * time.Second
)

// DataKeys names the Secret data entries that hold the certificates.
type DataKeys struct {
	// CACert holds the CA bundle: the current CA first, then any older CA
	// still in its overlap period, as concatenated PEM certificates.
	CACert string
	// CAKey holds the current CA's PEM private key.
	CAKey string
	// ServerCert and ServerKey hold the PEM serving certificate and key.
	ServerCert string
	ServerKey  string
}

// DefaultDataKeys returns ca-cert.pem, ca-key.pem, server-cert.pem and
// server-key.pem.
func DefaultDataKeys() DataKeys {
	return DataKeys{
		CACert:     "ca-cert.pem",
		CAKey:      "ca-key.pem",
		ServerCert: "server-cert.pem",
		ServerKey:  "server-key.pem",
	}
}

// WithDefaults returns k with every empty name replaced by its default.
func (k DataKeys) WithDefaults() DataKeys {
	d := DefaultDataKeys()
	if k.CACert == "" {
		k.CACert = d.CACert
	}
	if k.CAKey == "" {
		k.CAKey = d.CAKey
	}
	if k.ServerCert == "" {
		k.ServerCert = d.ServerCert
	}
	if k.ServerKey == "" {
		k.ServerKey = d.ServerKey
	}
	return k
}

// Options say which Secret the Reconciler owns and what it puts in it. A zero
// duration or an empty data key name takes its default.
type Options struct {
	// SecretName and Namespace name the Secret; both are required. Namespace
	// is also the namespace of the Service.
	SecretName string
	Namespace  string
	// ServiceName adds ServiceDNSNames(ServiceName, Namespace) to the serving
	// certificate. Optional when ExtraDNSNames or IPAddresses are given.
	ServiceName string
	// ExtraDNSNames and IPAddresses are added to the serving certificate, for
	// example 127.0.0.1 for a webhook reached out of cluster.
	ExtraDNSNames []string
	IPAddresses   []net.IP
	// Keys names the data entries; see DefaultDataKeys.
	Keys DataKeys

	// CAValidity is the CA's lifetime (default DefaultCAValidity);
	// CARotateBefore is how long before its expiry a new CA replaces it, and
	// so the overlap during which the bundle holds both (default
	// DefaultCARotateBefore).
	CAValidity     time.Duration
	CARotateBefore time.Duration
	// ServingValidity is the serving certificate's lifetime (default
	// DefaultServingValidity); ServingRotateBefore is how long before its
	// expiry it is re-issued (default DefaultServingRotateBefore).
	ServingValidity     time.Duration
	ServingRotateBefore time.Duration

	// TrustDelay is how long the Reconciler waits, after it first sees
	// every Publisher carry a new CA, before it signs a serving certificate
	// under that CA (default DefaultTrustDelay; negative means no wait).
	TrustDelay time.Duration
	// RetryInterval is when the Reconciler runs again after a failed run,
	// whatever the work queue's own retries do (default the shorter of
	// MaxRetryInterval and a quarter of ServingRotateBefore). It must be
	// shorter than ServingRotateBefore, so a failed rotation is tried again
	// well before the serving certificate expires.
	RetryInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.SecretName == "" || o.Namespace == "" {
		return o, errors.New("certificates: SecretName and Namespace are required")
	}
	if o.ServiceName == "" && len(o.ExtraDNSNames) == 0 && len(o.IPAddresses) == 0 {
		return o, fmt.Errorf("certificates: secret %s/%s: no ServiceName, ExtraDNSNames or IPAddresses for the serving certificate", o.Namespace, o.SecretName)
	}
	o.Keys = o.Keys.WithDefaults()
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.CAValidity, DefaultCAValidity)
	def(&o.CARotateBefore, DefaultCARotateBefore)
	def(&o.ServingValidity, DefaultServingValidity)
	def(&o.ServingRotateBefore, DefaultServingRotateBefore)
	def(&o.TrustDelay, DefaultTrustDelay)
	o.TrustDelay = max(o.TrustDelay, 0)
	def(&o.RetryInterval, min(MaxRetryInterval, o.ServingRotateBefore/4))
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"CAValidity", o.CAValidity}, {"CARotateBefore", o.CARotateBefore}, {"ServingValidity", o.ServingValidity}, {"ServingRotateBefore", o.ServingRotateBefore}, {"RetryInterval", o.RetryInterval}} {
		if d.v < 0 {
			return o, fmt.Errorf("certificates: secret %s/%s: %s %v is negative", o.Namespace, o.SecretName, d.name, d.v)
		}
	}
	// Each check prevents a certificate that is due for rotation the moment
	// it is issued, which would rotate on every reconcile.
	switch {
	case o.CARotateBefore >= o.CAValidity:
		return o, fmt.Errorf("certificates: secret %s/%s: CARotateBefore %v must be shorter than CAValidity %v", o.Namespace, o.SecretName, o.CARotateBefore, o.CAValidity)
	case o.ServingRotateBefore >= o.ServingValidity:
		return o, fmt.Errorf("certificates: secret %s/%s: ServingRotateBefore %v must be shorter than ServingValidity %v", o.Namespace, o.SecretName, o.ServingRotateBefore, o.ServingValidity)
	case o.ServingRotateBefore >= o.CARotateBefore:
		return o, fmt.Errorf("certificates: secret %s/%s: ServingRotateBefore %v must be shorter than CARotateBefore %v", o.Namespace, o.SecretName, o.ServingRotateBefore, o.CARotateBefore)
	case o.RetryInterval >= o.ServingRotateBefore:
		return o, fmt.Errorf("certificates: secret %s/%s: RetryInterval %v must be shorter than ServingRotateBefore %v", o.Namespace, o.SecretName, o.RetryInterval, o.ServingRotateBefore)
	}
	return o, nil
}

// dnsNames is every DNS name the serving certificate must carry.
func (o Options) dnsNames() []string {
	var names []string
	if o.ServiceName != "" {
		names = ServiceDNSNames(o.ServiceName, o.Namespace)
	}
	return append(names, o.ExtraDNSNames...)
}
