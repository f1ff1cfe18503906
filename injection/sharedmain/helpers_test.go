package sharedmain

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/webhook"
)

// onAnyPort returns flags with every listener the test leaves at its
// default on a port the kernel picks, reported in a file of the test's
// (listenAddresses reads it): processes of several tests run side by side,
// and a port chosen free before the process binds it can be taken by
// then.
func onAnyPort(t *testing.T, flags Flags) Flags {
	t.Helper()
	if flags.WebhookPort == 0 {
		flags.WebhookPort = AnyPort
	}
	if flags.ProbePort == 0 {
		flags.ProbePort = AnyPort
	}
	if flags.MetricsAddress == "" {
		flags.MetricsAddress = "127.0.0.1:0"
	}
	if flags.ListenAddressesFile == "" {
		flags.ListenAddressesFile = filepath.Join(t.TempDir(), "listen.json")
	}
	return flags
}

// listenAddresses waits for the addresses a process running with flags
// (onAnyPort) reports, at most 30 seconds.
func listenAddresses(t *testing.T, flags Flags) ListenAddresses {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a, err := WaitListenAddresses(ctx, flags.ListenAddressesFile)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// denier is a trivial admission controller: it denies everything at its
// path with a message naming the object, and reconciles nothing.
type denier struct {
	controller.LeaderAwareFuncs
	path string
}

func (d *denier) Reconcile(context.Context, string) error { return nil }
func (d *denier) Path() string                            { return d.path }
func (d *denier) Admit(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return webhook.Denied("denied " + req.Namespace + "/" + req.Name)
}

func newDenierController(path string) Constructor {
	return func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		return controller.NewImpl(&denier{path: path}, logging.FromContext(ctx), "denier"+path)
	}
}

// recorder records the keys its controller reconciled.
type recorder struct {
	mu   sync.Mutex
	keys map[string]int
}

func (r *recorder) Reconcile(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]int{}
	}
	r.keys[key]++
	return nil
}

func (r *recorder) seen(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[key] > 0
}

// syncBuffer is a log sink safe for the process's concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
func (b *syncBuffer) Sync() error { return nil }
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tlsClient trusts the CA bundle of a certificates Secret.
func tlsClient(t *testing.T, secret *corev1.Secret) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca-cert.pem"]) {
		t.Fatalf("secret %s/%s: no CA certificate in ca-cert.pem", secret.Namespace, secret.Name)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// admit posts an AdmissionReview for namespace/name to url and returns the
// response's decision.
func admit(ctx context.Context, client *http.Client, url, namespace, name string) (*admissionv1.AdmissionResponse, error) {
	review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
		UID: types.UID("uid-1"), Namespace: namespace, Name: name, Operation: admissionv1.Create,
	}}
	review.APIVersion, review.Kind = "admission.k8s.io/v1", "AdmissionReview"
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out.Response == nil {
		return nil, fmt.Errorf("POST %s: no response in review", url)
	}
	return out.Response, nil
}

// get returns the status code of GET url.
func get(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
