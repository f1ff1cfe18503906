package sharedmain

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/certificates"
)

// writeKeyPair writes a certificate valid from now for validity, and its
// key, into dir as tls.crt and tls.key, and returns the certificate.
func writeKeyPair(t *testing.T, dir string, now time.Time, validity time.Duration) *x509.Certificate {
	t.Helper()
	ca, err := certificates.GenerateCA("test-ca", now, validity)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := certificates.GenerateServingCert(ca, []string{"metrics.example"}, nil, now, validity)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetricsCertFile), kp.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetricsKeyFile), kp.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return kp.Cert
}

func servedSerial(t *testing.T, m *metricsCertificate) string {
	t.Helper()
	c, err := m.get(nil)
	if err != nil || c == nil || c.Leaf == nil {
		t.Fatalf("get = %v, %v", c, err)
	}
	return c.Leaf.SerialNumber.String()
}

// TestMetricsCertificateFromDirectory: the directory's pair is served,
// a changed pair is served once MetricsCertCheckInterval has passed, and
// a broken change keeps the last good pair.
func TestMetricsCertificateFromDirectory(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	dir := t.TempDir()
	first := writeKeyPair(t, dir, clock.Now(), time.Hour)
	m, err := newMetricsCertificate(dir, clock.Now, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, m); got != first.SerialNumber.String() {
		t.Fatalf("serving %s, want the directory's %s", got, first.SerialNumber)
	}
	// A renewed Secret: new content, and a new modification time.
	second := writeKeyPair(t, dir, clock.Now(), time.Hour)
	later := time.Now().Add(time.Second)
	for _, f := range []string{MetricsCertFile, MetricsKeyFile} {
		os.Chtimes(filepath.Join(dir, f), later, later)
	}
	clock.step(MetricsCertCheckInterval - time.Second)
	if got := servedSerial(t, m); got != first.SerialNumber.String() {
		t.Errorf("before the check interval: serving %s, want still %s", got, first.SerialNumber)
	}
	clock.step(time.Second)
	if got := servedSerial(t, m); got != second.SerialNumber.String() {
		t.Errorf("after the check interval: serving %s, want the new %s", got, second.SerialNumber)
	}
	// A half-written change: the key no longer matches.
	if err := os.WriteFile(filepath.Join(dir, MetricsKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.step(MetricsCertCheckInterval)
	if got := servedSerial(t, m); got != second.SerialNumber.String() {
		t.Errorf("after a broken change: serving %s, want the last good %s", got, second.SerialNumber)
	}
}

// TestMetricsCertificateStartErrors: a directory that cannot be served
// fails the start, naming the flag.
func TestMetricsCertificateStartErrors(t *testing.T) {
	now := time.Now()
	missing := t.TempDir()
	keyless := t.TempDir()
	writeKeyPair(t, keyless, now, time.Hour)
	os.Remove(filepath.Join(keyless, MetricsKeyFile))
	expired := t.TempDir()
	writeKeyPair(t, expired, now.Add(-2*time.Hour), time.Hour)
	for name, dir := range map[string]string{"empty directory": missing, "no key": keyless, "expired": expired} {
		t.Run(name, func(t *testing.T) {
			_, err := newMetricsCertificate(dir, time.Now, zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), "--metrics-cert-dir") {
				t.Errorf("newMetricsCertificate(%s) = %v, want an error naming --metrics-cert-dir", name, err)
			}
		})
	}
}

// TestMetricsCertificateSelfSigned: with no directory, a certificate for
// localhost is generated, and again once it nears its expiry.
func TestMetricsCertificateSelfSigned(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	m, err := newMetricsCertificate("", clock.Now, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.get(nil)
	if err := c.Leaf.VerifyHostname("localhost"); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}
	if got := c.Leaf.NotAfter.Sub(clock.Now()); got < selfSignedValidity-time.Minute {
		t.Errorf("self-signed certificate lives %v, want %v", got, selfSignedValidity)
	}
	first := servedSerial(t, m)
	clock.step(selfSignedValidity - selfSignedRenewBefore - time.Minute)
	if got := servedSerial(t, m); got != first {
		t.Errorf("renewed %v before its renewal time", selfSignedRenewBefore)
	}
	clock.step(time.Minute)
	if got := servedSerial(t, m); got == first {
		t.Errorf("not renewed %v before its expiry", selfSignedRenewBefore)
	}
}
