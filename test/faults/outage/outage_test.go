// Package outage_test makes the webhook's certificates Secret unwritable
// while rotations are due, longer than the work queue's old retry budget,
// and shows rotation resumes with no admission lost.
package outage_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

const repoRoot = "../../.."

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{repoRoot + "/" + faults.CRDPath}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

// Lifetimes short enough that rotations come every few tens of seconds:
// the serving certificate is renewed every 20s and the CA every 50s. The
// serving certificate's renewal margin (4m) is what a failed renewal has
// before the certificate expires, so it is longer than the outage plus the
// certificates reconciler's retry interval (30s, its default for this
// margin).
var lifetimes = []string{
	"--webhook-cert-validity=4m20s", "--webhook-cert-rotate-before=4m",
	"--webhook-ca-validity=5m", "--webhook-ca-rotate-before=4m10s",
}

// outage is longer than controller.Impl's old retry budget for one key
// (15 retries, about 166s) and than any rotation interval above.
const outage = 175 * time.Second

// presented records every certificate the webhook was seen to present.
type presented struct {
	mu      sync.Mutex
	serials []string
	expired []string
}

func (p *presented) observe(cert *x509.Certificate, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := cert.SerialNumber.Text(16)
	if n := len(p.serials); n == 0 || p.serials[n-1] != s {
		p.serials = append(p.serials, s)
	}
	if !at.Before(cert.NotAfter) {
		p.expired = append(p.expired, fmt.Sprintf("%s expired at %s, presented at %s", s, cert.NotAfter, at))
	}
}

func (p *presented) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.serials)
}

func (p *presented) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.serials) == 0 {
		return ""
	}
	return p.serials[len(p.serials)-1]
}

// TestRotationResumesAfterSecretWriteOutageWithRealAPIServer runs the
// controller binary with shortened certificate lifetimes under a steady
// load of creates through the webhook (four creators, about 50 a second:
// a failed admission shows within 80 ms, and the cores stay with the
// tests beside this one):
//
//  1. scheduled rotations, serving and CA, happen with no failed admission;
//  2. a ValidatingAdmissionPolicy then denies every write of the
//     certificates Secret for longer than the old retry budget, while
//     renewals come due and fail;
//  3. once the policy is gone, rotation resumes within the retry interval,
//     and the next scheduled one follows.
//
// Throughout, the webhook never presents an expired certificate and every
// create comes back bound.
func TestRotationResumesAfterSecretWriteOutageWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot, lifetimes...)
	ns := h.Namespace("outage-")
	h.Binding(ns, "outage", "outage", "")
	h.WaitAdmissionBinds(ns, "outage")
	start := time.Now()
	elapsed := func() string { return fmt.Sprintf("%6.1fs", time.Since(start).Seconds()) }

	// What the webhook presents, looked at every 200ms by a fresh handshake.
	seen := &presented{}
	stopWatching := make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopWatching:
				return
			case <-tick.C:
			}
			if cert, err := h.Served(); err == nil {
				seen.observe(cert, time.Now())
			}
		}
	})
	defer func() {
		select {
		case <-stopWatching:
		default:
			close(stopWatching)
		}
		watching.Wait()
	}()
	load := h.StartLoad(ns, "outage", 4, 80*time.Millisecond)
	defer load.Stop()

	// 1. Scheduled rotations: one CA rotation, and the serving certificate
	// signed by the new CA presented.
	first, err := h.Secret()
	if err != nil || first == nil {
		t.Fatalf("read Secret: %v", err)
	}
	firstCA := faults.Bundle(first)[0]
	h.Eventually("a scheduled CA rotation, then a serving certificate of the new CA presented", 3*time.Minute, func() (string, error) {
		s, err := h.Secret()
		if err != nil || s == nil {
			return fmt.Sprintf("no Secret (%v)", err), nil
		}
		ca := faults.Bundle(s)[0]
		if ca.Equal(firstCA) {
			return "CA not rotated yet", nil
		}
		served, err := h.Served()
		if err != nil {
			return err.Error(), nil
		}
		if !faults.SignedBy(served, ca) {
			return "not yet presenting a certificate of the new CA", nil
		}
		return "", nil
	})
	beforeOutage := seen.count()
	t.Logf("%s scheduled rotations: %d serving certificates presented, the CA rotated; %d admissions, %d failed",
		elapsed(), beforeOutage, load.Attempts(), len(load.Failures()))

	// 2. The outage.
	removePolicy := denySecretWrites(t, h)
	outageStart := time.Now()
	// A certificate written just before the policy took effect may be
	// presented a moment later (the server reloads from its informer):
	// what the outage must not change is the Secret's last certificate,
	// presented.
	h.Eventually("the Secret's last serving certificate presented", 30*time.Second, func() (string, error) {
		s, err := h.Secret()
		if err != nil || s == nil {
			return fmt.Sprintf("no Secret (%v)", err), nil
		}
		if want := faults.ServingCert(s).SerialNumber.Text(16); seen.last() != want {
			return fmt.Sprintf("presenting %s, the Secret holds %s", seen.last(), want), nil
		}
		return "", nil
	})
	lastBefore := seen.last()
	t.Logf("%s Secret writes denied; presenting %s", elapsed(), lastBefore)
	time.Sleep(outage)
	if got := seen.last(); got != lastBefore {
		t.Errorf("the presented certificate changed during the outage (%s to %s): writes were not denied", lastBefore, got)
	}
	denied := strings.Count(h.Log(), "denied by the outage test")
	removePolicy()
	outageEnd := time.Now()
	t.Logf("%s Secret writes allowed again after %.0fs; %d failed writes logged meanwhile", elapsed(), outageEnd.Sub(outageStart).Seconds(), denied)
	if denied < 2 {
		t.Errorf("%d denied Secret writes in the log, want several: the outage did not meet a due rotation", denied)
	}

	// 3. Rotation resumes, and the schedule goes on.
	resumed := h.Eventually("rotation after the outage", 90*time.Second, func() (string, error) {
		if seen.last() == lastBefore {
			return "still presenting the certificate from before the outage", nil
		}
		return "", nil
	})
	t.Logf("%s rotation resumed %.1fs after writes were allowed again", elapsed(), resumed.Seconds())
	afterResume := seen.last()
	next := h.Eventually("the next scheduled rotation", 90*time.Second, func() (string, error) {
		if seen.last() == afterResume {
			return "no further rotation yet", nil
		}
		return "", nil
	})
	t.Logf("%s next scheduled rotation %.1fs later", elapsed(), next.Seconds())

	attempts, failures := load.Stop()
	close(stopWatching)
	watching.Wait()
	t.Logf("in all: %d admissions, %d failed; %d serving certificates presented", attempts, len(failures), seen.count())
	for i, f := range failures {
		if i == 5 {
			break
		}
		t.Errorf("failed admission: %s", f)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d admissions failed, want 0", len(failures), attempts)
	}
	for _, e := range seen.expired {
		t.Errorf("presented an expired certificate: %s", e)
	}
	if dropped := strings.Contains(h.Log(), "dropping key after retries"); dropped {
		t.Logf("the work queue gave up on the certificates key during the outage; the reconciler's own schedule brought it back")
	}
	h.Audit(ns)
}

// denySecretWrites installs a ValidatingAdmissionPolicy and its binding
// that refuse CREATE and UPDATE of the certificates Secret, waits until the
// kube-apiserver enforces it, and returns what removes both.
func denySecretWrites(t *testing.T, h *faults.Harness) func() {
	t.Helper()
	ctx := context.Background()
	const name = "deny-webhook-certs-writes"
	policies := h.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := h.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	_, err := policies.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": faults.SystemNamespace}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					ResourceNames: []string{faults.SecretName},
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "certificates Secret writes denied by the outage test"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ValidatingAdmissionPolicy: %v", err)
	}
	_, err = bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ValidatingAdmissionPolicyBinding: %v", err)
	}
	remove := func() {
		bindings.Delete(ctx, name, metav1.DeleteOptions{})
		policies.Delete(ctx, name, metav1.DeleteOptions{})
		// Until the kube-apiserver drops it, writes still fail; a dry-run
		// update shows when it has.
		h.Eventually("policy removed", 30*time.Second, func() (string, error) {
			if err := dryRunSecretUpdate(h); err != nil {
				return err.Error(), nil
			}
			return "", nil
		})
	}
	t.Cleanup(func() {
		bindings.Delete(ctx, name, metav1.DeleteOptions{})
		policies.Delete(ctx, name, metav1.DeleteOptions{})
	})
	h.Eventually("policy enforced", 30*time.Second, func() (string, error) {
		if err := dryRunSecretUpdate(h); err == nil || !strings.Contains(err.Error(), "denied by the outage test") {
			return fmt.Sprintf("dry-run update not denied yet (%v)", err), nil
		}
		return "", nil
	})
	return remove
}

func dryRunSecretUpdate(h *faults.Harness) error {
	s, err := h.Secret()
	if err != nil || s == nil {
		return fmt.Errorf("read Secret: %v", err)
	}
	s.Annotations = map[string]string{"probe": time.Now().String()}
	_, err = h.Kube.CoreV1().Secrets(faults.SystemNamespace).Update(context.Background(), s, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
