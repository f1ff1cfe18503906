package admission_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/test/faults"
)

// TestSecretOverwrittenWithExpiredCAWithRealAPIServer runs the controller
// binary with default flags and overwrites its certificates Secret with an
// expired CA and an expired serving certificate (a restored backup, a bad
// manual edit) while clients create Deployments through the webhook
// (issue 20, item 5). Not one create may fail: the CAs the kube-apiserver
// trusts stay in the bundle it is given while the webhook presents a
// certificate one of them signed, until a new CA is trusted. Then the
// Secret is repaired: a valid CA first in its bundle and a valid serving
// certificate it signed.
func TestSecretOverwrittenWithExpiredCAWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := h.Namespace("expired-")
	h.Binding(ns, "expired", "expired", "")
	h.WaitAdmissionBinds(ns, "expired")
	ctx := context.Background()

	past := time.Now().Add(-72 * time.Hour)
	ca, err := certificates.GenerateCA("expired-ca", past, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := certificates.GenerateServingCert(ca, []string{"webhook"}, nil, past, 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// Three creators, one create after another, send several hundred
	// admissions a second here (more than the 50); the rate is
	// logged below.
	const loadCreators = 3
	load := h.StartLoad(ns, "expired", loadCreators, 0)
	h.Eventually("load running", 30*time.Second, func() (string, error) {
		if load.OK() < 10 {
			return fmt.Sprintf("%d creates so far", load.OK()), nil
		}
		return "", nil
	})
	s, err := h.Secret()
	if err != nil || s == nil {
		load.Stop()
		t.Fatalf("read Secret: %v", err)
	}
	s.Data[faults.Keys.CACert] = ca.CertPEM
	s.Data[faults.Keys.CAKey] = ca.KeyPEM
	s.Data[faults.Keys.ServerCert] = serving.CertPEM
	s.Data[faults.Keys.ServerKey] = serving.KeyPEM
	start, startAttempts := time.Now(), load.Attempts()
	if _, err := h.Kube.CoreV1().Secrets(faults.SystemNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		load.Stop()
		t.Fatal(err)
	}
	repaired := h.Eventually("Secret repaired: a valid CA and a serving certificate it signed, served", 90*time.Second, func() (string, error) {
		s, err := h.Secret()
		if err != nil || s == nil {
			return fmt.Sprintf("no Secret (%v)", err), nil
		}
		bundle := faults.Bundle(s)
		if len(bundle) == 0 || !time.Now().Before(bundle[0].NotAfter) {
			return "no valid CA first in the bundle yet", nil
		}
		cert := faults.ServingCert(s)
		if cert == nil || !time.Now().Before(cert.NotAfter) || !faults.SignedBy(cert, bundle[0]) {
			return "no valid serving certificate of the bundle's CA yet", nil
		}
		served, err := h.Served()
		if err != nil {
			return err.Error(), nil
		}
		if !slices.ContainsFunc(bundle, func(c *x509.Certificate) bool { return faults.SignedBy(served, c) }) {
			return "served certificate not signed by a CA of the bundle", nil
		}
		return "", nil
	})
	// The load goes on for ten seconds more, so fresh connections
	// handshake with whatever the webhook presents now.
	time.Sleep(10 * time.Second)
	attempts, failures := load.Stop()
	elapsed := time.Since(start)
	t.Logf("%d admissions in %.1fs after the overwrite (%.0f a second), %d failed; Secret repaired %.1fs after it",
		attempts-startAttempts, elapsed.Seconds(), float64(attempts-startAttempts)/elapsed.Seconds(), len(failures), repaired.Seconds())
	for i, f := range failures {
		if i == 5 {
			t.Logf("  ... %d more", len(failures)-5)
			break
		}
		t.Logf("  failed: %s", f)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d admissions failed after the Secret was overwritten with an expired CA, want 0", len(failures), attempts)
	}
	h.Audit(ns)
}
