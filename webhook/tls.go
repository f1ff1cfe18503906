package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
)

// SecretGetter finds a Secret by name in the webhook's namespace. A client-go
// lister for one namespace (corev1listers.SecretNamespaceLister, from
// lister.Secrets(ns)) satisfies it; so does any cache that returns objects
// with their resourceVersion. Get is called on every TLS handshake, so it
// must be a cache read, not an API call.
type SecretGetter interface {
	Get(name string) (*corev1.Secret, error)
}

// errNoServingCert marks a Secret that holds no serving certificate (yet).
var errNoServingCert = errors.New("no serving certificate")

// certSource serves the certificate from the Secret, parsing each
// resourceVersion once.
type certSource struct {
	secrets         SecretGetter
	name            string
	certKey, keyKey string
	now             func() time.Time
	logger          *zap.Logger
	parseMu         sync.Mutex // one parse per new resourceVersion, not one per handshake
	cached          atomic.Pointer[certEntry]
	lastGood        atomic.Pointer[tls.Certificate]
	parsedCount     atomic.Int64 // for tests: how many times a Secret was parsed
}

// certEntry is the outcome of parsing one resourceVersion of the Secret.
type certEntry struct {
	resourceVersion string
	cert            *tls.Certificate
	err             error
}

// get returns the certificate to serve now. When the Secret is missing or its
// newest version does not parse, the last good certificate is served while it
// is unexpired: a broken update must not take the webhook down.
func (c *certSource) get() (*tls.Certificate, error) {
	cert, err := c.fromSecret()
	if err == nil {
		if err = c.checkExpiry(cert); err == nil {
			c.lastGood.Store(cert)
			return cert, nil
		}
	}
	if last := c.lastGood.Load(); last != nil && c.checkExpiry(last) == nil {
		return last, nil
	}
	return nil, err
}

func (c *certSource) fromSecret() (*tls.Certificate, error) {
	secret, err := c.secrets.Get(c.name)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: secret %s: %w", c.name, err)
	}
	rv := secret.ResourceVersion
	if e := c.cached.Load(); e != nil && rv != "" && e.resourceVersion == rv {
		return e.cert, e.err
	}
	c.parseMu.Lock()
	defer c.parseMu.Unlock()
	if e := c.cached.Load(); e != nil && rv != "" && e.resourceVersion == rv {
		return e.cert, e.err
	}
	e := &certEntry{resourceVersion: rv}
	e.cert, e.err = c.parse(secret)
	c.parsedCount.Add(1)
	switch {
	// Logged once per resourceVersion, not on every handshake.
	case errors.Is(e.err, errNoServingCert):
		// The certificates reconciler writes a new CA before the serving
		// certificate it signs, and the last good one serves meanwhile.
		c.logger.Info("waiting for the secret to hold a serving certificate; serving the last good one meanwhile", zap.String("secret", c.name), zap.String("resourceVersion", rv))
	case e.err != nil:
		c.logger.Error("cannot serve certificate from secret", zap.String("secret", c.name), zap.String("resourceVersion", rv), zap.Error(e.err))
	}
	c.cached.Store(e)
	return e.cert, e.err
}

func (c *certSource) parse(secret *corev1.Secret) (*tls.Certificate, error) {
	certPEM, keyPEM := secret.Data[c.certKey], secret.Data[c.keyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, fmt.Errorf("serving certificate: secret %s/%s has no %s or %s: %w", secret.Namespace, secret.Name, c.certKey, c.keyKey, errNoServingCert)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("serving certificate: secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
	}
	return &cert, nil
}

func (c *certSource) checkExpiry(cert *tls.Certificate) error {
	now := c.now()
	switch {
	case cert.Leaf == nil:
		return errors.New("serving certificate: not parsed")
	case now.After(cert.Leaf.NotAfter):
		return fmt.Errorf("serving certificate: secret %s: expired at %s", c.name, cert.Leaf.NotAfter.Format(time.RFC3339))
	case now.Before(cert.Leaf.NotBefore):
		return fmt.Errorf("serving certificate: secret %s: not valid before %s", c.name, cert.Leaf.NotBefore.Format(time.RFC3339))
	}
	return nil
}

// getCertificate is tls.Config.GetCertificate: every handshake sees the
// Secret's current certificate, so a rotation needs no restart.
func (c *certSource) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.get()
}
