package sharedmain

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/webhook"
)

// TestParseCertificateFlags: lifetimes the certificates reconciler cannot
// work with are refused with an error naming the flags, and every
// combination the flags accept is one the certificates package accepts.
func TestParseCertificateFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "shortened, as a test runs them", args: []string{"--webhook-ca-validity=5m", "--webhook-ca-rotate-before=4m10s",
			"--webhook-cert-validity=4m20s", "--webhook-cert-rotate-before=4m"}},
		{name: "negative", args: []string{"--webhook-cert-validity=-1h"}, wantErr: "--webhook-cert-validity -1h0m0s is negative"},
		{name: "cert renewed at birth", args: []string{"--webhook-cert-rotate-before=168h"},
			wantErr: "--webhook-cert-rotate-before 168h0m0s must be shorter than --webhook-cert-validity 168h0m0s"},
		{name: "cert margin past the CA's", args: []string{"--webhook-cert-validity=2000h", "--webhook-cert-rotate-before=1000h"},
			wantErr: "--webhook-cert-rotate-before 1000h0m0s must be shorter than --webhook-ca-rotate-before 720h0m0s"},
		{name: "CA rotated at birth", args: []string{"--webhook-ca-validity=24h"},
			wantErr: "--webhook-ca-rotate-before 720h0m0s must be shorter than --webhook-ca-validity 24h0m0s"},
		{name: "not a duration", args: []string{"--webhook-ca-validity=year"}, wantErr: `invalid value "year" for flag -webhook-ca-validity`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFlags("test", tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseFlags error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFlags: %v", err)
			}
			// What the process would build from them.
			opts := webhook.Options{}.CertificateOptions("sys")
			opts.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			opts.CAValidity, opts.CARotateBefore = f.WebhookCAValidity, f.WebhookCARotateBefore
			opts.ServingValidity, opts.ServingRotateBefore = f.WebhookCertValidity, f.WebhookCertRotateBefore
			if _, err := newCertificatesForTest(opts); err != nil {
				t.Errorf("flags accepted, certificates refused: %v", err)
			}
			if f.WebhookCertRotateBefore > time.Hour {
				t.Errorf("cert rotate-before %v, want the shortened one", f.WebhookCertRotateBefore)
			}
		})
	}
}

func newCertificatesForTest(opts certificates.Options) (*certificates.Reconciler, error) {
	return certificates.NewReconciler(fake.NewClientset(), opts, certificates.ReconcilerOptions{})
}
