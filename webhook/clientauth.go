package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// clientCAs authenticates callers by their TLS client certificate: the
// chain must lead to a CA in a PEM file, which is re-read when it changes
// (a mounted ConfigMap or Secret is updated in place), at most once per
// clientCARecheck.
type clientCAs struct {
	path   string
	logger *zap.Logger
	now    func() time.Time

	mu      sync.Mutex
	pool    *x509.CertPool
	modTime time.Time
	size    int64
	checked time.Time
}

// clientCARecheck bounds how often a handshake looks at the CA file.
const clientCARecheck = time.Second

// loadClientCAs reads path, which must hold at least one PEM certificate.
func loadClientCAs(path string, logger *zap.Logger) (*clientCAs, error) {
	c := &clientCAs{path: path, logger: logger, now: time.Now}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("webhook: client CA file: %w", err)
	}
	pool, err := readCAFile(path)
	if err != nil {
		return nil, err
	}
	c.pool, c.modTime, c.size, c.checked = pool, fi.ModTime(), fi.Size(), c.now()
	return c, nil
}

func readCAFile(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook: client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("webhook: client CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// current returns the CA pool, re-reading the file if it changed. A file
// that turned unreadable or empty leaves the last good pool in force.
func (c *clientCAs) current() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.checked) < clientCARecheck {
		return c.pool
	}
	c.checked = now
	fi, err := os.Stat(c.path)
	if err != nil {
		c.logger.Error("client CA file unreadable; keeping the CAs read before", zap.String("path", c.path), zap.Error(err))
		return c.pool
	}
	if fi.ModTime().Equal(c.modTime) && fi.Size() == c.size {
		return c.pool
	}
	pool, err := readCAFile(c.path)
	if err != nil {
		c.logger.Error("client CA file changed but cannot be used; keeping the CAs read before", zap.String("path", c.path), zap.Error(err))
		return c.pool
	}
	c.pool, c.modTime, c.size = pool, fi.ModTime(), fi.Size()
	c.logger.Info("client CAs reloaded", zap.String("path", c.path))
	return c.pool
}

// verifyConnection is tls.Config.VerifyConnection for a server that asked
// for any client certificate (tls.RequireAnyClientCert): it runs on every
// handshake, resumed ones included, and fails the handshake unless the
// client's chain leads to a current CA and allows client authentication.
func (c *clientCAs) verifyConnection(cs tls.ConnectionState) error {
	certs := cs.PeerCertificates
	if len(certs) == 0 {
		return errors.New("webhook: client certificate required")
	}
	opts := x509.VerifyOptions{
		Roots:         c.current(),
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, ic := range certs[1:] {
		opts.Intermediates.AddCert(ic)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return fmt.Errorf("webhook: client certificate %q: %w", certs[0].Subject.CommonName, err)
	}
	return nil
}
