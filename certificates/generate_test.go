package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// t0 is a fixed clock reading on a whole second, so validity bounds compare
// exactly.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestGenerateCA(t *testing.T) {
	ca, err := GenerateCA("test CA", t0, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		CommonName      string
		IsCA            bool
		MaxPathLenZero  bool
		Curve           string
		SigAlg          x509.SignatureAlgorithm
		NotBefore       time.Time
		NotAfter        time.Time
		CanSign         bool
		SelfSignedValid bool
	}
	pub := ca.Cert.PublicKey.(*ecdsa.PublicKey)
	got := summary{
		CommonName:      ca.Cert.Subject.CommonName,
		IsCA:            ca.Cert.IsCA,
		MaxPathLenZero:  ca.Cert.MaxPathLenZero,
		Curve:           pub.Curve.Params().Name,
		SigAlg:          ca.Cert.SignatureAlgorithm,
		NotBefore:       ca.Cert.NotBefore,
		NotAfter:        ca.Cert.NotAfter,
		CanSign:         ca.Cert.KeyUsage&x509.KeyUsageCertSign != 0,
		SelfSignedValid: ca.Cert.CheckSignatureFrom(ca.Cert) == nil,
	}
	want := summary{
		CommonName: "test CA", IsCA: true, MaxPathLenZero: true, Curve: "P-256",
		SigAlg: x509.ECDSAWithSHA256, NotBefore: t0.Add(-ClockSkew), NotAfter: t0.Add(48 * time.Hour),
		CanSign: true, SelfSignedValid: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CA (-want +got):\n%s", diff)
	}
	// The PEM forms must round-trip to the same pair.
	parsed, err := ParseKeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatalf("ParseKeyPair(CA PEM): %v", err)
	}
	if !parsed.Cert.Equal(ca.Cert) || !parsed.Key.Equal(ca.Key) {
		t.Errorf("PEM round trip changed the CA")
	}
}

func TestGenerateServingCert(t *testing.T) {
	ca, err := GenerateCA("test CA", t0, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	names := ServiceDNSNames("hook", "sys")
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	tests := []struct {
		name         string
		validity     time.Duration
		wantNotAfter time.Time
	}{
		{"within the CA's life", 7 * 24 * time.Hour, t0.Add(7 * 24 * time.Hour)},
		{"clamped to the CA's expiry", 90 * 24 * time.Hour, ca.Cert.NotAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := GenerateServingCert(ca, names, ips, t0, tt.validity)
			if err != nil {
				t.Fatal(err)
			}
			c := kp.Cert
			type summary struct {
				CommonName string
				DNSNames   []string
				IPs        []string
				Curve      string
				SigAlg     x509.SignatureAlgorithm
				ExtUsage   []x509.ExtKeyUsage
				IsCA       bool
				NotBefore  time.Time
				NotAfter   time.Time
			}
			var gotIPs []string
			for _, ip := range c.IPAddresses {
				gotIPs = append(gotIPs, ip.String())
			}
			got := summary{c.Subject.CommonName, c.DNSNames, gotIPs, kp.Key.Curve.Params().Name, c.SignatureAlgorithm, c.ExtKeyUsage, c.IsCA, c.NotBefore, c.NotAfter}
			want := summary{
				CommonName: "hook",
				DNSNames:   []string{"hook", "hook.sys", "hook.sys.svc", "hook.sys.svc.cluster.local"},
				IPs:        []string{"127.0.0.1"},
				Curve:      elliptic.P256().Params().Name,
				SigAlg:     x509.ECDSAWithSHA256,
				ExtUsage:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				NotBefore:  t0.Add(-ClockSkew),
				NotAfter:   tt.wantNotAfter,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("serving certificate (-want +got):\n%s", diff)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			for _, host := range append(names, "127.0.0.1") {
				if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: t0}); err != nil {
					t.Errorf("verify for %s: %v", host, err)
				}
			}
		})
	}
}

func TestGenerateServingCertRejects(t *testing.T) {
	ca, err := GenerateCA("test CA", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		ca       *KeyPair
		dnsNames []string
		validity time.Duration
		wantErr  string
	}{
		{"no CA", nil, []string{"a"}, time.Hour, "no CA to sign with"},
		{"no names", ca, nil, time.Hour, "no DNS names or IP addresses"},
		{"zero validity", ca, []string{"a"}, 0, "validity 0s is not positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := GenerateServingCert(tt.ca, tt.dnsNames, nil, t0, tt.validity)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("GenerateServingCert error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseKeyPairRejectsMismatch(t *testing.T) {
	a, err := GenerateCA("a", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateCA("b", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		certPEM, key  []byte
		wantErrSubstr string
	}{
		{"foreign key", a.CertPEM, b.KeyPEM, "does not match"},
		{"no certificate", nil, a.KeyPEM, "no certificate"},
		{"garbage key", a.CertPEM, []byte("garbage"), "no PEM block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseKeyPair(tt.certPEM, tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstr) {
				t.Errorf("ParseKeyPair error = %v, want it to contain %q", err, tt.wantErrSubstr)
			}
		})
	}
}
