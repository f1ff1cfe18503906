package admission_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/test/faults"
)

// creators is the size of the burst: as many clients creating at once as
// the reproduction used.
const creators = 60

// TestCAChangeUnderBurstWithRealAPIServer runs the controller binary and
// changes its CA while 60 clients create Deployments through the webhook:
// the certificates Secret deleted, and its CA key removed, three times
// each. Every create must come back bound: the webhook never presents a
// certificate the kube-apiserver does not trust yet. Each run waits until
// the webhook presents a certificate signed by the new CA, so the switch
// itself happens under load.
//
// The serving certificate lives two minutes and is renewed every twenty
// seconds (flags), for two reasons: a lost CA key leaves the serving
// certificate of the old CA in place until its regular renewal, which
// then comes within the run; and the scheduled renewals under load are
// tested too.
//
// The per-peer connection cap is lowered (flag) so that the
// kube-apiserver meets it on every change: it builds a new client for
// the webhook each time the caBundle changes and leaves the old one's
// idle connections (up to 25) open for 90 seconds, so across a few
// changes it holds far more than the creators it serves (184 seen at
// once with the default cap); at the default of 256 it met the cap in CI
// only now and then, and the connection the webhook closed for a new one
// failed an admission. The cap, 150, is above what one change needs
// (the 60 connections the new client opens beside the 60 the old one is
// finishing on), so what is cut are the dropped clients' spares.
// Everything else is the binary's defaults.
func TestCAChangeUnderBurstWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot, "--webhook-cert-validity=2m", "--webhook-cert-rotate-before=100s",
		"--webhook-max-connections-per-peer=150")
	ns := h.Namespace("burst-")
	h.Binding(ns, "burst", "burst", "")
	h.WaitAdmissionBinds(ns, "burst")
	ctx := context.Background()

	changes := []struct {
		name   string
		change func() error
	}{
		{"secret deleted", func() error {
			return h.Kube.CoreV1().Secrets(faults.SystemNamespace).Delete(ctx, faults.SecretName, metav1.DeleteOptions{})
		}},
		{"CA key removed", func() error {
			s, err := h.Secret()
			if err != nil {
				return err
			}
			delete(s.Data, faults.Keys.CAKey)
			_, err = h.Kube.CoreV1().Secrets(faults.SystemNamespace).Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
	}
	var totalAttempts, totalFailures int
	served := map[string]bool{} // serials the webhook was seen to present
	for round := 1; round <= 3; round++ {
		for _, c := range changes {
			name := fmt.Sprintf("%s #%d", c.name, round)
			before, err := h.Secret()
			if err != nil || before == nil {
				t.Fatalf("%s: read Secret: %v", name, err)
			}
			oldCA := faults.Bundle(before)[0]

			load := h.StartLoad(ns, "burst", creators, 0)
			h.Eventually(name+": load running", 30*time.Second, func() (string, error) {
				if load.OK() < creators {
					return fmt.Sprintf("%d creates so far", load.OK()), nil
				}
				return "", nil
			})
			if err := c.change(); err != nil {
				load.Stop()
				t.Fatalf("%s: %v", name, err)
			}
			var newCA *x509.Certificate
			switched := h.Eventually(name+": webhook presents a certificate of the new CA", 90*time.Second, func() (string, error) {
				s, err := h.Secret()
				if err != nil || s == nil {
					return fmt.Sprintf("no Secret (%v)", err), nil
				}
				bundle := faults.Bundle(s)
				if len(bundle) == 0 || bundle[0].Equal(oldCA) {
					return "no new CA yet", nil
				}
				newCA = bundle[0]
				cert, err := h.Served()
				if err != nil {
					return err.Error(), nil
				}
				served[cert.SerialNumber.String()] = true
				if !faults.SignedBy(cert, newCA) {
					return "served certificate not yet signed by the new CA", nil
				}
				return "", nil
			})
			// Load goes on after the switch, so fresh connections
			// handshake with the new certificate.
			atSwitch := load.Attempts()
			h.Eventually(name+": load after the switch", 30*time.Second, func() (string, error) {
				if load.Attempts() < atSwitch+2*creators {
					return "not enough creates yet", nil
				}
				return "", nil
			})
			attempts, failures := load.Stop()
			totalAttempts += int(attempts)
			totalFailures += len(failures)
			t.Logf("%s: %d admissions, %d failed; new CA served %.1fs after the change", name, attempts, len(failures), switched.Seconds())
			for i, f := range failures {
				if i == 5 {
					t.Logf("  ... %d more", len(failures)-5)
					break
				}
				t.Logf("  failed: %s", f)
			}
		}
	}
	cuts := strings.Count(h.Log(), "at a connection cap")
	t.Logf("in all: %d admissions during 6 CA changes, %d failed; %d serving certificates seen presented; the connection cap met %d times", totalAttempts, totalFailures, len(served), cuts)
	if totalFailures > 0 {
		t.Errorf("%d of %d admissions failed across the CA changes, want 0", totalFailures, totalAttempts)
	}
	if cuts == 0 {
		t.Error("the kube-apiserver never met the per-peer connection cap: the test no longer closes connections for new ones")
	}
	h.Audit(ns)
}
