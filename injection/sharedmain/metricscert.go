package sharedmain

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/certificates"
)

// The metrics endpoint's certificate (Flags.MetricsCertDir).
const (
	// MetricsCertFile and MetricsKeyFile are the names of the certificate
	// and key in --metrics-cert-dir: the keys of a kubernetes.io/tls
	// Secret, as cert-manager writes them.
	MetricsCertFile = "tls.crt"
	MetricsKeyFile  = "tls.key"
	// MetricsCertCheckInterval is how often, at most, the files in
	// --metrics-cert-dir are looked at again for a change (a handshake
	// looks when this long has passed since the last look).
	MetricsCertCheckInterval = 10 * time.Second
	// selfSignedValidity is the life of the certificate the process
	// generates when no directory is given; it is generated again, at a
	// handshake, once less than selfSignedRenewBefore of it is left.
	selfSignedValidity    = 365 * 24 * time.Hour
	selfSignedRenewBefore = 30 * 24 * time.Hour
)

// metricsCertificate is the metrics endpoint's serving certificate: the
// files of a directory, read again when they change, or one the process
// generates in memory. Its get is tls.Config.GetCertificate.
type metricsCertificate struct {
	dir    string // empty: self-signed
	now    func() time.Time
	logger *zap.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	renewAt time.Time // self-signed: when to generate another
	checked time.Time // directory: when the files were last looked at
	stamp   [2]fileStamp
}

// fileStamp tells a file's content changed without reading it.
type fileStamp struct {
	size    int64
	modTime time.Time
}

// newMetricsCertificate loads the certificate of dir, or generates one
// when dir is empty; an error names the flag and the file.
func newMetricsCertificate(dir string, now func() time.Time, logger *zap.Logger) (*metricsCertificate, error) {
	m := &metricsCertificate{dir: dir, now: now, logger: logger}
	var err error
	if dir == "" {
		err = m.generate()
	} else {
		m.checked = now()
		err = m.load()
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// get returns the certificate to serve, generating or reloading it first
// when it is due.
func (m *metricsCertificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	switch {
	case m.dir == "" && !now.Before(m.renewAt):
		if err := m.generate(); err != nil {
			m.logger.Error("metrics: generate a new self-signed certificate; serving the old one", zap.Error(err))
		}
	case m.dir != "" && now.Sub(m.checked) >= MetricsCertCheckInterval:
		m.checked = now
		if stamp, err := m.stamps(); err == nil && stamp != m.stamp {
			if err := m.load(); err != nil {
				m.logger.Error("metrics: read the changed certificate; serving the old one", zap.String("dir", m.dir), zap.Error(err))
				m.stamp = stamp // once per change, not at every handshake
			} else {
				m.logger.Info("metrics: serving the changed certificate", zap.String("dir", m.dir))
			}
		}
	}
	return m.cert, nil
}

// generate makes a CA and a certificate it signs, for localhost and the
// host's name: a scraper cannot verify it (Prometheus's
// insecure_skip_verify), it only encrypts.
func (m *metricsCertificate) generate() error {
	now := m.now()
	ca, err := certificates.GenerateCA("bindkit-metrics-ca", now, selfSignedValidity)
	if err != nil {
		return fmt.Errorf("metrics: self-signed certificate: %w", err)
	}
	names := []string{"localhost"}
	if host, err := os.Hostname(); err == nil && host != "" && host != "localhost" {
		names = append(names, host)
	}
	kp, err := certificates.GenerateServingCert(ca, names, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, now, selfSignedValidity)
	if err != nil {
		return fmt.Errorf("metrics: self-signed certificate: %w", err)
	}
	m.cert = &tls.Certificate{Certificate: [][]byte{kp.Cert.Raw, ca.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
	m.renewAt = kp.Cert.NotAfter.Add(-selfSignedRenewBefore)
	return nil
}

// load reads the directory's certificate and key, which must belong
// together and be valid now.
func (m *metricsCertificate) load() error {
	stamp, err := m.stamps()
	if err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(m.dir, MetricsCertFile), filepath.Join(m.dir, MetricsKeyFile)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("--metrics-cert-dir %s: %w", m.dir, err)
	}
	if cert.Leaf == nil { // GODEBUG=x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("--metrics-cert-dir %s: %s: %w", m.dir, MetricsCertFile, err)
		}
	}
	if now := m.now(); now.After(cert.Leaf.NotAfter) {
		return fmt.Errorf("--metrics-cert-dir %s: %s expired at %s", m.dir, MetricsCertFile, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	m.cert, m.stamp = &cert, stamp
	return nil
}

func (m *metricsCertificate) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	var errs []error
	for i, name := range []string{MetricsCertFile, MetricsKeyFile} {
		// Stat follows the symbolic links a Secret volume swaps.
		fi, err := os.Stat(filepath.Join(m.dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("--metrics-cert-dir: %w", err))
			continue
		}
		out[i] = fileStamp{size: fi.Size(), modTime: fi.ModTime()}
	}
	return out, errors.Join(errs...)
}
