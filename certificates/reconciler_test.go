package certificates

import (
	"crypto/x509"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	testNS     = "sys"
	testSecret = "hook-certs"
	testKey    = testNS + "/" + testSecret
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time)         { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// enqueued records EnqueueAfter calls.
type enqueued struct {
	mu    sync.Mutex
	calls []enqueueCall
}

type enqueueCall struct {
	Key   string
	After time.Duration
}

func (e *enqueued) add(key string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, enqueueCall{key, d})
}

func (e *enqueued) last(t *testing.T) enqueueCall {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) == 0 {
		t.Fatal("Reconcile scheduled no re-run")
	}
	return e.calls[len(e.calls)-1]
}

type fixture struct {
	client *fake.Clientset
	clock  *fakeClock
	queue  *enqueued
	r      *Reconciler
	keys   DataKeys
}

func testOptions() Options {
	return Options{
		SecretName:    testSecret,
		Namespace:     testNS,
		ServiceName:   "hook",
		ExtraDNSNames: []string{"hook.example"},
		IPAddresses:   []net.IP{net.ParseIP("127.0.0.1")},
	}
}

func newFixture(t *testing.T, opts Options, objects ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, nil, objects...)
}

func newFixtureWith(t *testing.T, opts Options, publishers []Publisher, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(objects...), clock: &fakeClock{now: t0}, queue: &enqueued{}, keys: DefaultDataKeys()}
	r, err := NewReconciler(f.client, opts, ReconcilerOptions{Clock: f.clock.Now, EnqueueAfter: f.queue.add, Publishers: publishers})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

func (f *fixture) reconcile(t *testing.T) {
	t.Helper()
	if err := f.r.Reconcile(t.Context(), testKey); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

func (f *fixture) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	s, err := f.client.CoreV1().Secrets(testNS).Get(t.Context(), testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get secret: %v", err)
	}
	return s
}

// state is the parsed content of the Secret.
type state struct {
	bundle  []*x509.Certificate
	ca      *KeyPair // bundle[0] with the stored CA key
	serving *KeyPair
}

func (f *fixture) state(t *testing.T) state {
	t.Helper()
	data := f.secret(t).Data
	bundle, err := ParseCertificates(data[f.keys.CACert])
	if err != nil || len(bundle) == 0 {
		t.Fatalf("CA bundle: %d certificates, %v", len(bundle), err)
	}
	ca, err := ParseKeyPair(EncodeCertificates(bundle[:1]), data[f.keys.CAKey])
	if err != nil {
		t.Fatalf("CA key does not belong to the first bundle certificate: %v", err)
	}
	serving, err := ParseKeyPair(data[f.keys.ServerCert], data[f.keys.ServerKey])
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	return state{bundle: bundle, ca: ca, serving: serving}
}

func serials(certs []*x509.Certificate) []string {
	var s []string
	for _, c := range certs {
		s = append(s, c.SerialNumber.String())
	}
	return s
}

// verifiesWith reports whether cert chains to exactly one of roots.
func verifiesWith(cert *x509.Certificate, root *x509.Certificate, at time.Time) bool {
	pool := x509.NewCertPool()
	pool.AddCert(root)
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, DNSName: "hook.sys.svc"})
	return err == nil
}

func TestReconcileCreatesSecret(t *testing.T) {
	f := newFixture(t, testOptions())
	f.reconcile(t)

	st := f.state(t)
	if len(st.bundle) != 1 {
		t.Errorf("bundle holds %d certificates, want 1", len(st.bundle))
	}
	if !verifiesWith(st.serving.Cert, st.ca.Cert, t0) {
		t.Errorf("serving certificate does not verify against the CA")
	}
	wantNames := []string{"hook", "hook.sys", "hook.sys.svc", "hook.sys.svc.cluster.local", "hook.example"}
	if diff := cmp.Diff(wantNames, st.serving.Cert.DNSNames); diff != "" {
		t.Errorf("serving DNS names (-want +got):\n%s", diff)
	}
	// The next run is when the serving certificate enters its rotation window.
	want := enqueueCall{testKey, DefaultServingValidity - DefaultServingRotateBefore}
	if diff := cmp.Diff(want, f.queue.last(t)); diff != "" {
		t.Errorf("scheduled re-run (-want +got):\n%s", diff)
	}
}

func TestReconcileIsNoOpWhenCurrent(t *testing.T) {
	f := newFixture(t, testOptions())
	f.reconcile(t)
	before := f.secret(t)
	f.client.ClearActions()
	f.clock.Advance(time.Hour)
	f.reconcile(t)

	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("unexpected %s %s on a current Secret", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if diff := cmp.Diff(before.Data, f.secret(t).Data); diff != "" {
		t.Errorf("Secret data changed (-before +after):\n%s", diff)
	}
	want := enqueueCall{testKey, DefaultServingValidity - DefaultServingRotateBefore - time.Hour}
	if diff := cmp.Diff(want, f.queue.last(t)); diff != "" {
		t.Errorf("scheduled re-run (-want +got):\n%s", diff)
	}
}

func TestReconcileIgnoresOtherKeys(t *testing.T) {
	f := newFixture(t, testOptions())
	if err := f.r.Reconcile(t.Context(), testNS+"/other"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("%d API calls for a key the reconciler does not own, want 0", n)
	}
}

func TestReconcileRepairsSecret(t *testing.T) {
	good := newFixture(t, testOptions())
	good.reconcile(t)
	goodData := good.secret(t).Data
	other, err := GenerateCA("other", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	k := DefaultDataKeys()

	tests := []struct {
		name           string
		mutate         func(map[string][]byte)
		opts           func(*Options)
		wantNewCA      bool
		wantNewServing bool
		wantBundleLen  int
	}{
		{name: "serving key missing", mutate: func(d map[string][]byte) { delete(d, k.ServerKey) }, wantNewServing: true, wantBundleLen: 1},
		{name: "serving cert unparsable", mutate: func(d map[string][]byte) {
			d[k.ServerCert] = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		}, wantNewServing: true, wantBundleLen: 1},
		{name: "serving key foreign", mutate: func(d map[string][]byte) { d[k.ServerKey] = other.KeyPEM }, wantNewServing: true, wantBundleLen: 1},
		{name: "serving cert from another CA", mutate: func(d map[string][]byte) { d[k.ServerCert], d[k.ServerKey] = other.CertPEM, other.KeyPEM }, wantNewServing: true, wantBundleLen: 1},
		{name: "names changed", opts: func(o *Options) { o.ExtraDNSNames = []string{"new.example"} }, wantNewServing: true, wantBundleLen: 1},
		// Without the CA key nothing new can be signed by the old CA, but its
		// certificate stays trusted so the serving certificate it signed
		// keeps working until its regular rotation.
		{name: "CA key missing", mutate: func(d map[string][]byte) { delete(d, k.CAKey) }, wantNewCA: true, wantBundleLen: 2},
		{name: "CA key unparsable", mutate: func(d map[string][]byte) { d[k.CAKey] = []byte("garbage") }, wantNewCA: true, wantBundleLen: 2},
		{name: "CA bundle garbage", mutate: func(d map[string][]byte) { d[k.CACert] = []byte("garbage") }, wantNewCA: true, wantNewServing: true, wantBundleLen: 1},
		{name: "everything missing", mutate: func(d map[string][]byte) {
			for _, name := range []string{k.CACert, k.CAKey, k.ServerCert, k.ServerKey} {
				delete(d, name)
			}
		}, wantNewCA: true, wantNewServing: true, wantBundleLen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string][]byte{"unrelated": []byte("kept")}
			for name, v := range goodData {
				data[name] = v
			}
			if tt.mutate != nil {
				tt.mutate(data)
			}
			opts := testOptions()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			f := newFixture(t, opts, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS},
				Data:       data,
			})
			f.reconcile(t)
			st := f.state(t)
			after := f.secret(t).Data

			type outcome struct {
				NewCA, NewServing bool
				BundleLen         int
				Unrelated         string
				ServingVerifies   bool
			}
			pool := x509.NewCertPool()
			for _, c := range st.bundle {
				pool.AddCert(c)
			}
			_, verr := st.serving.Cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: t0, DNSName: opts.dnsNames()[0]})
			got := outcome{
				NewCA:           string(after[k.CAKey]) != string(goodData[k.CAKey]),
				NewServing:      string(after[k.ServerCert]) != string(goodData[k.ServerCert]),
				BundleLen:       len(st.bundle),
				Unrelated:       string(after["unrelated"]),
				ServingVerifies: verr == nil,
			}
			want := outcome{tt.wantNewCA, tt.wantNewServing, tt.wantBundleLen, "kept", true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("repaired Secret (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServingRotationKeepsCA(t *testing.T) {
	f := newFixture(t, testOptions())
	f.reconcile(t)
	first := f.state(t)

	// One second into the rotation window.
	f.clock.Set(first.serving.Cert.NotAfter.Add(-DefaultServingRotateBefore + time.Second))
	f.reconcile(t)
	second := f.state(t)

	if !second.ca.Cert.Equal(first.ca.Cert) || !second.ca.Key.Equal(first.ca.Key) {
		t.Errorf("serving rotation changed the CA")
	}
	if second.serving.Cert.SerialNumber.Cmp(first.serving.Cert.SerialNumber) == 0 {
		t.Errorf("serving certificate was not rotated")
	}
	if !verifiesWith(second.serving.Cert, first.ca.Cert, f.clock.Now()) {
		t.Errorf("rotated serving certificate does not verify against the unchanged CA")
	}
	want := enqueueCall{testKey, DefaultServingValidity - DefaultServingRotateBefore}
	if diff := cmp.Diff(want, f.queue.last(t)); diff != "" {
		t.Errorf("scheduled re-run (-want +got):\n%s", diff)
	}
}

func TestCARotationOverlap(t *testing.T) {
	const day = 24 * time.Hour
	opts := testOptions()
	opts.CAValidity, opts.CARotateBefore = 100*day, 10*day
	opts.ServingValidity, opts.ServingRotateBefore = 20*day, day
	f := newFixture(t, opts)
	f.reconcile(t)
	oldCA := f.state(t).ca

	// Step 1, at the CA's rotation time: a new CA leads the bundle, the old
	// one stays, and the serving certificate is renewed under the old CA.
	f.clock.Set(oldCA.Cert.NotAfter.Add(-opts.CARotateBefore))
	f.reconcile(t)
	st := f.state(t)
	newCA := st.ca
	if newCA.Cert.Equal(oldCA.Cert) {
		t.Fatal("CA was not rotated")
	}
	if diff := cmp.Diff(serials([]*x509.Certificate{newCA.Cert, oldCA.Cert}), serials(st.bundle)); diff != "" {
		t.Errorf("bundle during overlap (-want +got):\n%s", diff)
	}
	if !verifiesWith(st.serving.Cert, oldCA.Cert, f.clock.Now()) {
		t.Errorf("serving certificate at CA rotation is not signed by the old CA")
	}
	if got, want := st.serving.Cert.NotAfter, oldCA.Cert.NotAfter; !got.Equal(want) {
		t.Errorf("serving NotAfter = %v, want clamped to the old CA's expiry %v", got, want)
	}
	// Next: the serving certificate's rotation, one day before the old CA ends.
	if diff := cmp.Diff(enqueueCall{testKey, opts.CARotateBefore - day}, f.queue.last(t)); diff != "" {
		t.Errorf("scheduled re-run after CA rotation (-want +got):\n%s", diff)
	}

	// Step 2: the serving certificate rotates, now under the new CA; the old
	// CA stays in the bundle until it expires, which is the next run.
	f.clock.Advance(opts.CARotateBefore - day)
	f.reconcile(t)
	st = f.state(t)
	if !verifiesWith(st.serving.Cert, newCA.Cert, f.clock.Now()) {
		t.Errorf("serving certificate after the overlap is not signed by the new CA")
	}
	if diff := cmp.Diff(serials([]*x509.Certificate{newCA.Cert, oldCA.Cert}), serials(st.bundle)); diff != "" {
		t.Errorf("bundle before the old CA expires (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(enqueueCall{testKey, day}, f.queue.last(t)); diff != "" {
		t.Errorf("scheduled re-run for the old CA's expiry (-want +got):\n%s", diff)
	}

	// Step 3: the old CA has expired and leaves the bundle.
	f.clock.Set(oldCA.Cert.NotAfter)
	f.reconcile(t)
	st = f.state(t)
	if diff := cmp.Diff(serials([]*x509.Certificate{newCA.Cert}), serials(st.bundle)); diff != "" {
		t.Errorf("bundle after the old CA expired (-want +got):\n%s", diff)
	}
	if !st.ca.Cert.Equal(newCA.Cert) {
		t.Errorf("CA changed again after the overlap")
	}
}

func TestNewReconcilerRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"no secret name", func(o *Options) { o.SecretName = "" }, "SecretName and Namespace are required"},
		{"no names", func(o *Options) { o.ServiceName, o.ExtraDNSNames, o.IPAddresses = "", nil, nil }, "no ServiceName"},
		{"CA rotates at birth", func(o *Options) { o.CARotateBefore = o.CAValidity + time.Hour; o.CAValidity = time.Hour }, "CARotateBefore"},
		{"serving rotates at birth", func(o *Options) { o.ServingRotateBefore = DefaultServingValidity }, "ServingRotateBefore"},
		{"negative lifetime", func(o *Options) { o.ServingValidity = -time.Hour }, "ServingValidity -1h0m0s is negative"},
		{"retry as slow as the margin", func(o *Options) { o.RetryInterval = DefaultServingRotateBefore }, "RetryInterval 24h0m0s must be shorter than ServingRotateBefore"},
		{"nil publisher", func(*Options) {}, "publisher 0 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			tt.mutate(&opts)
			var ro ReconcilerOptions
			if tt.name == "nil publisher" {
				ro.Publishers = []Publisher{nil}
			}
			_, err := NewReconciler(fake.NewClientset(), opts, ro)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewReconciler error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
