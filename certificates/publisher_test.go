package certificates

import (
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakePublisher publishes whatever the test sets, as a webhook
// configuration's caBundle would.
type fakePublisher struct {
	mu        sync.Mutex
	bundle    []byte
	published bool
	err       error
}

func (p *fakePublisher) PublishedCABundle() ([]byte, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bundle, p.published, p.err
}

func (p *fakePublisher) String() string { return "MutatingWebhookConfiguration test" }

func (p *fakePublisher) publish(bundle []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bundle, p.published = bundle, true
}

// copyFrom publishes the Secret's bundle, as an admission controller does.
func (p *fakePublisher) copyFrom(t *testing.T, f *fixture) {
	t.Helper()
	p.publish(f.secret(t).Data[f.keys.CACert])
}

// servingSerial is the serial of the Secret's serving certificate, "" when
// it holds none.
func (f *fixture) servingSerial(t *testing.T) string {
	t.Helper()
	data := f.secret(t).Data
	kp, err := ParseKeyPair(data[f.keys.ServerCert], data[f.keys.ServerKey])
	if err != nil {
		return ""
	}
	return kp.Cert.SerialNumber.String()
}

func (f *fixture) bundle(t *testing.T) []*x509.Certificate {
	t.Helper()
	certs, err := ParseCertificates(f.secret(t).Data[f.keys.CACert])
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// TestCAChangeWaitsForPublishers walks every way the CA can change without
// a scheduled rotation. In each, no serving certificate is signed by the
// new CA until the Publisher carries it and TrustDelay has passed; until
// then the Secret keeps what it had (the webhook serves its last good
// certificate), and the bundle keeps the old CA trusted.
func TestCAChangeWaitsForPublishers(t *testing.T) {
	// A healthy Secret, published.
	good := newFixture(t, testOptions())
	good.reconcile(t)
	goodData := good.secret(t).Data
	oldCA := good.state(t).ca.Cert
	oldServing := good.servingSerial(t)
	k := DefaultDataKeys()

	tests := []struct {
		name   string
		secret func(map[string][]byte) map[string][]byte // nil: the Secret is deleted
		// wantSameCA: the CA survives (its key is in the Secret and its
		// certificate among the published ones), so it does not change.
		wantSameCA bool
	}{
		{name: "secret deleted", secret: nil},
		{name: "CA key removed", secret: func(d map[string][]byte) map[string][]byte { delete(d, k.CAKey); return d }},
		{name: "CA key garbage", secret: func(d map[string][]byte) map[string][]byte { d[k.CAKey] = []byte("garbage"); return d }},
		{name: "CA bundle and serving pair removed, key kept", secret: func(d map[string][]byte) map[string][]byte {
			delete(d, k.CACert)
			delete(d, k.ServerCert)
			delete(d, k.ServerKey)
			return d
		}, wantSameCA: true},
		{name: "CA bundle removed, key kept", secret: func(d map[string][]byte) map[string][]byte { delete(d, k.CACert); return d }, wantSameCA: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objects []runtime.Object
			if tt.secret != nil {
				data := map[string][]byte{}
				for name, v := range goodData {
					data[name] = v
				}
				objects = append(objects, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS}, Data: tt.secret(data)})
			}
			pub := &fakePublisher{}
			pub.publish(goodData[k.CACert])
			f := newFixtureWith(t, testOptions(), []Publisher{pub}, objects...)

			// 1. The bundle gets the new CA and keeps the old one
			// (recovered from the Publisher when the Secret lost it); the
			// serving certificate is the old one, or none.
			f.reconcile(t)
			bundle := f.bundle(t)
			if tt.wantSameCA {
				if diff := cmp.Diff(serials([]*x509.Certificate{oldCA}), serials(bundle)); diff != "" {
					t.Errorf("bundle recovered with the CA key kept (-want +got):\n%s", diff)
				}
				f.clock.Advance(DefaultTrustDelay)
				f.reconcile(t)
				if st := f.state(t); !st.ca.Cert.Equal(oldCA) || !verifiesWith(st.serving.Cert, oldCA, f.clock.Now()) {
					t.Errorf("CA changed, or the serving certificate is not signed by the kept CA")
				}
				return
			}
			newCA := bundle[0]
			if len(bundle) != 2 || newCA.Equal(oldCA) || !bundle[1].Equal(oldCA) {
				t.Fatalf("bundle = %v, want a new CA followed by the old one %s", serials(bundle), oldCA.SerialNumber)
			}
			servingBefore := f.servingSerial(t)
			if servingBefore != "" && servingBefore != oldServing {
				t.Fatalf("serving certificate changed to %s before the new CA was published", servingBefore)
			}

			// 2. Even once the old serving certificate is due, nothing is
			// signed while the Publisher does not carry the new CA.
			f.clock.Set(good.state(t).serving.Cert.NotAfter.Add(-DefaultServingRotateBefore))
			f.reconcile(t)
			if got := f.servingSerial(t); got != servingBefore {
				t.Fatalf("serving certificate changed while the Publisher lagged")
			}
			if diff := cmp.Diff(enqueueCall{testKey, trustPollInterval}, f.queue.last(t)); diff != "" {
				t.Errorf("next run while the Publisher lags (-want +got):\n%s", diff)
			}

			// 3. Published: the wait for TrustDelay starts.
			pub.copyFrom(t, f)
			f.reconcile(t)
			if got := f.servingSerial(t); got != servingBefore {
				t.Fatalf("serving certificate changed the moment the Publisher caught up, before TrustDelay")
			}
			if diff := cmp.Diff(enqueueCall{testKey, DefaultTrustDelay}, f.queue.last(t)); diff != "" {
				t.Errorf("next run during TrustDelay (-want +got):\n%s", diff)
			}

			// 4. After TrustDelay: a serving certificate under the new CA,
			// with the old CA still in the bundle.
			f.clock.Advance(DefaultTrustDelay)
			f.reconcile(t)
			st := f.state(t)
			if !verifiesWith(st.serving.Cert, newCA, f.clock.Now()) {
				t.Errorf("serving certificate after TrustDelay is not signed by the new CA")
			}
			if diff := cmp.Diff(serials([]*x509.Certificate{newCA, oldCA}), serials(st.bundle)); diff != "" {
				t.Errorf("bundle after the switch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPublisherNotInstalledConstrainsNothing: a configuration that does not
// exist calls no webhook, so the Reconciler signs at once.
func TestPublisherNotInstalledConstrainsNothing(t *testing.T) {
	f := newFixtureWith(t, testOptions(), []Publisher{&fakePublisher{}})
	f.reconcile(t)
	if f.servingSerial(t) == "" {
		t.Fatal("no serving certificate although no Publisher publishes")
	}
}

// TestScheduledCARotationWaitsForLaggingPublisher: the regular CA rotation
// publishes first and signs under the new CA only at the next serving
// rotation; if the Publisher has not caught up by then, the certificate
// under the old CA keeps serving until it has.
func TestScheduledCARotationWaitsForLaggingPublisher(t *testing.T) {
	const day = 24 * time.Hour
	opts := testOptions()
	opts.CAValidity, opts.CARotateBefore = 100*day, 10*day
	opts.ServingValidity, opts.ServingRotateBefore = 20*day, day
	pub := &fakePublisher{}
	f := newFixtureWith(t, opts, []Publisher{pub})
	f.reconcile(t)
	pub.copyFrom(t, f)
	oldCA := f.state(t).ca.Cert

	f.clock.Set(oldCA.NotAfter.Add(-opts.CARotateBefore))
	f.reconcile(t) // CA rotation; the Publisher does not follow
	underOld := f.servingSerial(t)
	f.clock.Advance(opts.CARotateBefore - day) // the serving rotation is due
	f.reconcile(t)
	if got := f.servingSerial(t); got != underOld {
		t.Fatalf("serving certificate rotated under a CA the Publisher does not carry")
	}
	pub.copyFrom(t, f)
	f.reconcile(t)
	f.clock.Advance(DefaultTrustDelay)
	f.reconcile(t)
	st := f.state(t)
	if !verifiesWith(st.serving.Cert, st.ca.Cert, f.clock.Now()) || st.ca.Cert.Equal(oldCA) {
		t.Errorf("serving certificate is not signed by the new CA once published")
	}
}

// TestEveryPathSchedulesTheNextRun: a Secret that cannot be written for
// far longer than any work queue retries still has a next run, and
// rotation resumes when writes work again.
func TestEveryPathSchedulesTheNextRun(t *testing.T) {
	opts := testOptions()
	f := newFixture(t, opts)
	f.reconcile(t)
	first := f.servingSerial(t)

	var failing bool
	var mu sync.Mutex
	f.client.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return true, nil, errors.New("denied by policy")
		}
		return false, nil, nil
	})
	mu.Lock()
	failing = true
	mu.Unlock()
	f.clock.Set(f.state(t).serving.Cert.NotAfter.Add(-DefaultServingRotateBefore)) // rotation due
	for range 100 {
		err := f.r.Reconcile(t.Context(), testKey)
		if err == nil || !strings.Contains(err.Error(), "secret sys/hook-certs: update: denied by policy") {
			t.Fatalf("Reconcile with writes denied: err = %v", err)
		}
		if diff := cmp.Diff(enqueueCall{testKey, MaxRetryInterval}, f.queue.last(t)); diff != "" {
			t.Fatalf("next run after a failure (-want +got):\n%s", diff)
		}
		f.clock.Advance(MaxRetryInterval)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	f.reconcile(t)
	if f.servingSerial(t) == first {
		t.Error("serving certificate not rotated once writes work again")
	}
}

func TestObserveReportsOverdueCertificateOnce(t *testing.T) {
	opts := testOptions()
	leader := newFixture(t, opts)
	leader.reconcile(t)
	secret := leader.secret(t)
	notAfter := leader.state(t).serving.Cert.NotAfter

	core, logs := observer.New(zap.ErrorLevel)
	queue := &enqueued{}
	clock := &fakeClock{now: t0}
	client := fake.NewClientset(secret)
	follower, err := NewReconciler(client, opts, ReconcilerOptions{Clock: clock.Now, EnqueueAfter: queue.add, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	overdue := notAfter.Add(-DefaultServingRotateBefore / 2)
	observe := func() {
		t.Helper()
		if err := follower.Observe(t.Context(), testKey); err != nil {
			t.Fatal(err)
		}
	}

	observe()
	if diff := cmp.Diff(enqueueCall{testKey, overdue.Sub(t0)}, queue.last(t)); diff != "" {
		t.Errorf("follower's next look (-want +got):\n%s", diff)
	}
	clock.Set(overdue)
	observe()
	observe()
	if n := logs.Len(); n != 1 {
		t.Errorf("%d error logs for one overdue certificate, want 1", n)
	}
	if diff := cmp.Diff(enqueueCall{testKey, MaxRetryInterval}, queue.last(t)); diff != "" {
		t.Errorf("follower's next look once overdue (-want +got):\n%s", diff)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("follower issued %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
