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

	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations name
	// the configurations whose webhooks get the CA bundle after each
	// reconcile (see InjectCABundle). Empty means none.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
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
	// Each check prevents a certificate that is due for rotation the moment
	// it is issued, which would rotate on every reconcile.
	switch {
	case o.CARotateBefore >= o.CAValidity:
		return o, fmt.Errorf("certificates: secret %s/%s: CARotateBefore %v must be shorter than CAValidity %v", o.Namespace, o.SecretName, o.CARotateBefore, o.CAValidity)
	case o.ServingRotateBefore >= o.ServingValidity:
		return o, fmt.Errorf("certificates: secret %s/%s: ServingRotateBefore %v must be shorter than ServingValidity %v", o.Namespace, o.SecretName, o.ServingRotateBefore, o.ServingValidity)
	case o.ServingRotateBefore >= o.CARotateBefore:
		return o, fmt.Errorf("certificates: secret %s/%s: ServingRotateBefore %v must be shorter than CARotateBefore %v", o.Namespace, o.SecretName, o.ServingRotateBefore, o.CARotateBefore)
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
