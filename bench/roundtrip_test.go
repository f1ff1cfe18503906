package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/metrics"
	"github.com/bindkit/bindkit/test/fixtures"
	"github.com/bindkit/bindkit/webhook"
)

// clients is how many concurrent callers post AdmissionReviews, as the
// kube-apiserver's many request goroutines do.
const clients = 8

// roundTripBindings are the Bindings both webhooks serve: ten selecting
// other apps and one selecting the subject, all in bindingNamespace.
var roundTripBindings = bindingSet{n: 10, match: matchSelector}

// BenchmarkRoundTrip measures AdmissionReviews posted over HTTPS (TLS 1.3,
// HTTP/1.1, kept-alive connections) on 127.0.0.1 by 8 concurrent clients:
// bindkit's webhook server with the psbinding admission controller against
// controller-runtime's webhook server with a Defaulter for appsv1.Deployment
// that applies the same Bindings, and against the floor (startFloor), a bare
// net/http TLS server with the same TLS settings and certificate that reads
// the request and returns a canned allowed AdmissionReview. The matching request is the subject of one
// Binding and gets a patch; the non-matching one is a Deployment in the same
// namespace that no Binding selects. ns/op is wall time divided by requests,
// i.e. the inverse of throughput; req/s, p50-ns and p99-ns are reported too.
// bindkit's server counts and times every admission in a Prometheus
// registry, as injection/sharedmain runs it by default
// (BINDKIT_BENCH_METRICS=off leaves the metrics out).
func BenchmarkRoundTrip(b *testing.B) {
	certs := newPKI(b)
	requests := []struct {
		name      string
		subject   string
		wantPatch bool
	}{
		{"matching", subjectName, true},
		{"non-matching", "api", false},
	}
	servers := []struct {
		name  string
		start func(b *testing.B, pki *pki) (url string, stop func())
		// canned servers answer every request the same: allowed, no patch.
		canned bool
	}{
		{"bindkit", startBindkit, false},
		{"bindkit-in-manager", startBindkitInManager, false},
		{"controller-runtime", startControllerRuntime, false},
		{"floor", startFloor, true},
	}
	for _, rq := range requests {
		body := admissionReview(b, rq.subject)
		for _, srv := range servers {
			b.Run(fmt.Sprintf("request=%s/impl=%s", rq.name, srv.name), func(b *testing.B) {
				url, stop := srv.start(b, certs)
				defer stop()
				client := certs.client()
				defer client.CloseIdleConnections()
				runClients(b, client, url, body, rq.wantPatch && !srv.canned)
			})
		}
	}
}

// runClients sends b.N reviews from `clients` goroutines and reports
// throughput and latency percentiles. The connections are opened before the
// timer starts: the kube-apiserver keeps its connections to a webhook alive.
func runClients(b *testing.B, client *http.Client, url string, body []byte, wantPatch bool) {
	var warm sync.WaitGroup
	warmErrs := make([]error, clients)
	for i := range clients {
		warm.Go(func() { _, warmErrs[i] = post(client, url, body, wantPatch) })
	}
	warm.Wait()
	if err := errors.Join(warmErrs...); err != nil {
		b.Fatal(err)
	}

	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N || failed.Load() != nil {
					return
				}
				d, err := post(client, url, body, wantPatch)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				latencies[i] = d
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(latencies[len(latencies)/2]), "p50-ns")
	b.ReportMetric(float64(latencies[len(latencies)*99/100]), "p99-ns")
}

// reviewResponse is the part of the AdmissionReview answer the clients check.
type reviewResponse struct {
	Response struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
		Patch   []byte `json:"patch"`
	} `json:"response"`
}

// post sends one review and checks the answer: 200, the request's UID,
// allowed, and a patch exactly when one is wanted.
func post(client *http.Client, url string, body []byte, wantPatch bool) (time.Duration, error) {
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST %s: %s: %s", url, resp.Status, data)
	}
	var review reviewResponse
	if err := json.Unmarshal(data, &review); err != nil {
		return 0, fmt.Errorf("POST %s: decode %s: %w", url, data, err)
	}
	switch r := review.Response; {
	case r.UID != reviewUID:
		return 0, fmt.Errorf("POST %s: response uid %q, want %q", url, r.UID, reviewUID)
	case !r.Allowed:
		return 0, fmt.Errorf("POST %s: denied: %s", url, data)
	case (len(r.Patch) > 0) != wantPatch:
		return 0, fmt.Errorf("POST %s: patch present = %v, want %v: %s", url, len(r.Patch) > 0, wantPatch, data)
	}
	return d, nil
}

const reviewUID = "0f5e4c1a-6c1d-4a47-9a0e-5a1f3c2b7d10"

// admissionReview is the body the kube-apiserver posts for a CREATE of the
// realistic Deployment named name in bindingNamespace.
func admissionReview(tb testing.TB, name string) []byte {
	tb.Helper()
	raw, err := json.Marshal(fixtures.RealisticDeployment(bindingNamespace, name))
	if err != nil {
		tb.Fatal(err)
	}
	req := deploymentRequest(bindingNamespace, raw)
	req.Name = name
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// pki is a CA and a serving certificate for 127.0.0.1 made by bindkit's
// certificates package, served by both webhooks.
type pki struct {
	ca      *certificates.KeyPair
	serving *certificates.KeyPair
}

func newPKI(tb testing.TB) *pki {
	tb.Helper()
	now := time.Now()
	ca, err := certificates.GenerateCA("bench CA", now, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	serving, err := certificates.GenerateServingCert(ca, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, now, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return &pki{ca: ca, serving: serving}
}

// client returns an HTTPS client that trusts the CA, speaks HTTP/1.1 (a
// custom TLS config turns HTTP/2 off in net/http) and keeps one connection
// per concurrent caller.
func (p *pki) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
			MaxIdleConnsPerHost: clients,
			MaxConnsPerHost:     clients,
			DisableCompression:  true,
		},
	}
}

// startBindkit serves bindkit's psbinding admission controller with
// webhook.Server on a loopback port, its certificate read from a Secret in
// a lister as in a cluster.
func startBindkit(b *testing.B, p *pki) (string, func()) {
	keys := certificates.DefaultDataKeys()
	secrets := corelisters.NewSecretLister(secretIndexer(b, map[string][]byte{
		keys.CACert: p.ca.CertPEM, keys.ServerCert: p.serving.CertPEM, keys.ServerKey: p.serving.KeyPEM,
	}))
	ac := bindkitAdmission(b, roundTripBindings, secrets)
	opts := webhook.Options{SecretName: secretName, GracePeriod: -1}
	if os.Getenv("BINDKIT_BENCH_METRICS") != "off" {
		// Metrics on, as injection/sharedmain runs the server by default:
		// every admission counted and timed in a Prometheus registry.
		m, err := metrics.New(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		opts.Observer = m.Admission()
	}
	srv, err := webhook.New(opts, secrets.Secrets(systemNamespace), ac)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	return "https://" + ln.Addr().String() + ac.Path(), func() {
		cancel()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}
}

// startBindkitInManager serves bindkit's admission controller as
// controllerruntime.Add mounts it in a Manager: bindkit's handler
// (webhook.NewHandler, metrics on as Add runs it) registered on
// controller-runtime's webhook server, configured as
// startControllerRuntime's.
func startBindkitInManager(b *testing.B, p *pki) (string, func()) {
	keys := certificates.DefaultDataKeys()
	secrets := corelisters.NewSecretLister(secretIndexer(b, map[string][]byte{
		keys.CACert: p.ca.CertPEM, keys.ServerCert: p.serving.CertPEM, keys.ServerKey: p.serving.KeyPEM,
	}))
	ac := bindkitAdmission(b, roundTripBindings, secrets)
	var opts webhook.Options
	if os.Getenv("BINDKIT_BENCH_METRICS") != "off" {
		m, err := metrics.New(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		opts.Observer = m.Admission()
	}
	handler, err := webhook.NewHandler(opts, ac)
	if err != nil {
		b.Fatal(err)
	}
	return serveControllerRuntime(b, p, ac.Path(), handler)
}

// startControllerRuntime serves a Defaulter applying the same Bindings with
// controller-runtime's webhook server, configured as its docs advise
// (TLS 1.3 here, HTTP/2 off), its certificate read from files.
func startControllerRuntime(b *testing.B, p *pki) (string, func()) {
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	return serveControllerRuntime(b, p, "/bindings", admission.WithDefaulter(scheme, newCRDefaulter(roundTripBindings)))
}

// serveControllerRuntime serves handler at path on controller-runtime's
// webhook server, configured as its docs advise (TLS 1.3 here, HTTP/2
// off), its certificate read from files.
func serveControllerRuntime(b *testing.B, p *pki, path string, handler http.Handler) (string, func()) {
	dir := b.TempDir()
	for name, data := range map[string][]byte{"tls.crt": p.serving.CertPEM, "tls.key": p.serving.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	port := freePort(b)
	srv := crwebhook.NewServer(crwebhook.Options{
		Host:    "127.0.0.1",
		Port:    port,
		CertDir: dir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS13
			c.NextProtos = []string{"http/1.1"}
		}},
	})
	srv.Register(path, handler)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- srv.Start(ctx) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	stop := func() {
		cancel()
		if err := <-started; err != nil {
			b.Error(err)
		}
	}
	if err, exited := waitTLS(addr, p, started); err != nil {
		if !exited {
			stop()
		}
		b.Fatal(err)
	}
	return "https://" + addr + path, stop
}

// floorResponse is the floor's canned answer: the request's UID, allowed,
// nothing else, as the kube-apiserver needs it.
var floorResponse = []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"` + reviewUID + `","allowed":true}}`)

// startFloor serves the round trip's floor: what every webhook pays
// whatever it decides. A net/http server with the TLS settings of bindkit's
// (TLS 1.3 minimum, HTTP/1.1 only, the same ECDSA serving certificate,
// handed out by GetCertificate as bindkit's server does) whose handler reads
// the whole request body and writes floorResponse.
func startFloor(b *testing.B, p *pki) (string, func()) {
	cert, err := tls.X509KeyPair(p.serving.CertPEM, p.serving.KeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(floorResponse)
		}),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS13,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil },
		},
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	return "https://" + ln.Addr().String() + "/", func() {
		srv.Close()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Error(err)
		}
	}
}

// crDefaulter is the hand-written equivalent of the Bindings for
// controller-runtime: the Bindings of each namespace, applied in name order
// to the Deployments they select.
type crDefaulter struct {
	byNamespace map[string][]crBinding
}

type crBinding struct {
	name     string
	subject  string
	selector labels.Selector
	spec     bindingSpec
}

func newCRDefaulter(set bindingSet) *crDefaulter {
	d := &crDefaulter{byNamespace: map[string][]crBinding{}}
	for _, def := range set.defs() {
		cb := crBinding{name: def.name, subject: def.subject, spec: def.spec}
		if def.selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(def.selector)
			if err != nil {
				panic(err) // the fixtures' selectors are valid
			}
			cb.selector = sel
		}
		d.byNamespace[bindingNamespace] = append(d.byNamespace[bindingNamespace], cb)
	}
	for _, list := range d.byNamespace {
		slices.SortFunc(list, func(a, b crBinding) int { return cmp.Compare(a.name, b.name) })
	}
	return d
}

// Default implements admission.Defaulter.
func (d *crDefaulter) Default(_ context.Context, obj *appsv1.Deployment) error {
	for _, b := range d.byNamespace[obj.Namespace] {
		if (b.subject != "" && b.subject == obj.Name) || (b.selector != nil && b.selector.Matches(labels.Set(obj.Labels))) {
			b.spec.do(&obj.Spec.Template.Spec)
		}
	}
	return nil
}

// freePort returns a loopback port nothing listens on right now; the
// controller-runtime server takes a port number, not a listener.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitTLS waits until addr answers an HTTPS request, or the server fails
// to start; exited says the server's Start has returned. A whole request,
// not a bare handshake, so that no half-finished handshake is left for the
// server to log.
func waitTLS(addr string, p *pki, started <-chan error) (err error, exited bool) {
	client := p.client()
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("https://" + addr + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			return resp.Body.Close(), false
		}
		select {
		case serr := <-started:
			return fmt.Errorf("controller-runtime webhook server on %s: %v", addr, serr), true
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controller-runtime webhook server on %s not serving: %w", addr, err), false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
