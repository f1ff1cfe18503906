package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
)

// blockingController holds every request until release is closed, after
// reserving reserve bytes.
type blockingController struct {
	reserve int64
	entered chan struct{}
	release chan struct{}
}

func newBlockingController(reserve int64) *blockingController {
	return &blockingController{reserve: reserve, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (c *blockingController) Path() string { return "/block" }
func (c *blockingController) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if err := Reserve(ctx, c.reserve); err != nil {
		return Overloaded(err)
	}
	c.entered <- struct{}{}
	<-c.release
	return Allowed()
}

// postAsync posts body to path on s in the background.
func postAsync(s http.Handler, path string, body []byte) <-chan int {
	done := make(chan int, 1)
	go func() { done <- post(s, path, "application/json", body).Code }()
	return done
}

func TestAdmissionsInFlightCap(t *testing.T) {
	ctrl := newBlockingController(0)
	s := newTestServer(t, Options{MaxAdmissionsInFlight: 2}, ctrl)
	body := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)
	first, second := postAsync(s, "/block", body), postAsync(s, "/block", body)
	<-ctrl.entered
	<-ctrl.entered

	w := post(s, "/block", "application/json", body)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("third admission: status %d, Retry-After %q; want 429 with Retry-After 1", w.Code, w.Header().Get("Retry-After"))
	}
	if want := "webhook overloaded: 2 admissions in flight, its limit (--webhook-max-in-flight); retry\n"; w.Body.String() != want {
		t.Errorf("message %q, want %q", w.Body.String(), want)
	}
	close(ctrl.release)
	for _, done := range []<-chan int{first, second} {
		if code := <-done; code != http.StatusOK {
			t.Errorf("held admission answered %d, want 200", code)
		}
	}
	if w := post(s, "/block", "application/json", body); w.Code != http.StatusOK {
		t.Errorf("admission after the others ended: %d %s, want 200", w.Code, w.Body)
	}
}

func TestMemoryBudget(t *testing.T) {
	const bodyLimit = 64 << 10
	budget := 2*bodyReservation(bodyLimit) + 100<<10
	opts := Options{MaxRequestBodyBytes: bodyLimit, MaxInFlightMemory: budget}
	body := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)

	t.Run("a controller's reservation leaves no room for another body", func(t *testing.T) {
		ctrl := newBlockingController(budget - bodyReservation(int64(len(body))) - 10000)
		s := newTestServer(t, opts, ctrl)
		held := postAsync(s, "/block", body)
		<-ctrl.entered
		w := post(s, "/block", "application/json", body)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Fatalf("status %d, Retry-After %q; want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		if !strings.Contains(w.Body.String(), "memory budget (--webhook-max-in-flight-memory); retry") {
			t.Errorf("message %q does not name the budget", w.Body)
		}
		close(ctrl.release)
		if code := <-held; code != http.StatusOK {
			t.Fatalf("held admission: %d", code)
		}
		if s.budget.used.Load() != 0 {
			t.Errorf("budget holds %d bytes after every request ended, want 0", s.budget.used.Load())
		}
	})
	t.Run("Overloaded from the controller is an HTTP 429", func(t *testing.T) {
		hog := newBlockingController(budget)
		s := newTestServer(t, opts, hog)
		w := post(s, "/block", "application/json", body)
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", w.Code)
		}
		// budget plus the body's share is more than the whole budget.
		if !strings.Contains(w.Body.String(), "more than the webhook's memory budget of") {
			t.Errorf("message %q, want the over-budget reason", w.Body)
		}
	})
	t.Run("a review that would decode beyond the budget is a 413", func(t *testing.T) {
		s := newTestServer(t, opts, allowAll("/allow"))
		var extra strings.Builder
		for i := range 5000 {
			fmt.Fprintf(&extra, `"k%d":[],`, i)
		}
		bomb := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","userInfo":{"extra":{` +
			extra.String() + `"z":[]}},"object":{}}}`
		w := post(s, "/allow", "application/json", []byte(bomb))
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "more than the webhook's memory budget") {
			t.Errorf("userInfo.extra bomb: %d %q, want 413 naming the budget", w.Code, w.Body)
		}
		if s.budget.used.Load() != 0 {
			t.Errorf("budget holds %d bytes after the refusal", s.budget.used.Load())
		}
	})
	t.Run("Reserve outside a server is free", func(t *testing.T) {
		if err := Reserve(context.Background(), 1<<40); err != nil {
			t.Errorf("Reserve: %v", err)
		}
	})
	t.Run("Reserve errors", func(t *testing.T) {
		st := &requestState{budget: &memoryBudget{limit: 1000}}
		if err := st.reserve(600); err != nil {
			t.Fatal(err)
		}
		other := &requestState{budget: st.budget}
		if err := other.reserve(600); !errors.Is(err, ErrOverloaded) {
			t.Errorf("second reservation: %v, want ErrOverloaded", err)
		}
		if err := other.reserve(1001); !errors.Is(err, ErrOverBudget) {
			t.Errorf("reservation beyond the budget: %v, want ErrOverBudget", err)
		}
		st.release()
		if err := other.reserve(600); err != nil {
			t.Errorf("after release: %v", err)
		}
	})
}

func TestObjectLimitsReachTheController(t *testing.T) {
	var got ObjectLimits
	ctrl := &funcController{path: "/limits", admit: func(ctx context.Context, _ *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		got = ObjectLimitsFrom(ctx)
		return Allowed()
	}}
	s := newTestServer(t, Options{ObjectLimits: ObjectLimits{MaxContainers: 7}}, ctrl)
	decodeResponse(t, post(s, "/limits", "application/json", reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)))
	want := DefaultObjectLimits()
	want.MaxContainers = 7
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ObjectLimitsFrom (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(DefaultObjectLimits(), ObjectLimitsFrom(context.Background())); diff != "" {
		t.Errorf("ObjectLimitsFrom outside a server (-want +got):\n%s", diff)
	}
}

func TestBoundOptionsRejected(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{ReadTimeout: -time.Second}, "webhook: ReadTimeout -1s is negative"},
		{Options{MaxConnections: -1}, "webhook: MaxConnections -1 is negative"},
		{Options{MaxConnectionsPerPeer: -1}, "webhook: MaxConnectionsPerPeer -1 is negative"},
		{Options{HandshakeTimeout: -time.Second}, "webhook: HandshakeTimeout -1s is negative"},
		{Options{ReadHeaderTimeout: -time.Second}, "webhook: ReadHeaderTimeout -1s is negative"},
		{Options{MinBodyRate: -1}, "webhook: MinBodyRate -1 is negative"},
		{Options{MaxAdmissionsInFlight: -1}, "webhook: MaxAdmissionsInFlight -1 is negative"},
		{Options{MaxInFlightMemory: 10 << 20}, "webhook: MaxInFlightMemory 10Mi holds fewer than two requests of MaxRequestBodyBytes 7Mi; want at least 43040Ki"},
		{Options{ObjectLimits: ObjectLimits{MaxEnv: -1}}, "webhook: ObjectLimits.MaxEnv -1 is negative"},
		{Options{ObjectLimits: ObjectLimits{MaxDepth: 20000}}, "webhook: ObjectLimits.MaxDepth 20000 is more than 10000, the JSON decoder's own limit"},
		{Options{ClientCAFile: "/nonexistent/ca.crt"}, "webhook: client CA file: stat /nonexistent/ca.crt: no such file or directory"},
	}
	for _, tt := range tests {
		_, err := New(tt.opts, &secretMap{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("New(%+v) error = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// rawPost writes a request head announcing length bytes, then body, on a
// TLS connection to addr, and returns the status line of the answer.
func rawPost(t *testing.T, addr string, roots *x509.CertPool, length int, body string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /block?timeout=30s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", length, body)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := readLine(conn)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return line
}

func readLine(r io.Reader) (string, error) {
	var b bytes.Buffer
	one := make([]byte, 1)
	for {
		if _, err := r.Read(one); err != nil {
			return b.String(), err
		}
		if one[0] == '\n' {
			return strings.TrimSpace(b.String()), nil
		}
		b.WriteByte(one[0])
	}
}

func TestUnfinishedBodyTimesOut(t *testing.T) {
	pki := newTestPKI(t)
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	s, err := New(Options{ReadTimeout: 300 * time.Millisecond, GracePeriod: -1}, secrets, newBlockingController(0))
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, s)
	start := time.Now()
	if got := rawPost(t, addr, pki.pool(), 1000, `{"apiVersion":`); got != "HTTP/1.1 408 Request Timeout" {
		t.Errorf("unfinished body answered %q, want 408", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("unfinished body held %v", d)
	}
	if s.budget.used.Load() != 0 || s.inFlight.Load() != 0 {
		t.Errorf("after the timeout: budget %d bytes, %d in flight; want none", s.budget.used.Load(), s.inFlight.Load())
	}
}

// clientPKI is a CA and client certificates it signs.
type clientPKI struct {
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
}

func newClientPKI(t *testing.T, name string) *clientPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Minute),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &clientPKI{caCert: cert, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (p *clientPKI) clientCert(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Minute),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestClientCertificateAuthentication(t *testing.T) {
	pki := newTestPKI(t)
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	trusted, other := newClientPKI(t, "trusted CA"), newClientPKI(t, "other CA")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, trusted.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{ClientCAFile: caFile, GracePeriod: -1}, secrets, allowAll("/allow"))
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, s)
	body := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)
	call := func(certs ...tls.Certificate) error {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pki.pool(), Certificates: certs}, DisableKeepAlives: true}}
		resp, err := client.Post("https://"+addr+"/allow", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	tests := []struct {
		name    string
		certs   []tls.Certificate
		wantErr string
	}{
		{"signed by the CA", []tls.Certificate{trusted.clientCert(t, "kube-apiserver", x509.ExtKeyUsageClientAuth)}, ""},
		{"no certificate", nil, "certificate required"},
		{"signed by another CA", []tls.Certificate{other.clientCert(t, "intruder", x509.ExtKeyUsageClientAuth)}, "bad certificate"},
		{"not for client authentication", []tls.Certificate{trusted.clientCert(t, "server", x509.ExtKeyUsageServerAuth)}, "bad certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := call(tt.certs...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("call: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("call error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}

	t.Run("the CA file is re-read when it changes", func(t *testing.T) {
		if err := os.WriteFile(caFile, other.caPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(time.Minute)
		os.Chtimes(caFile, future, future)
		s.clientCAs.mu.Lock()
		s.clientCAs.checked = time.Time{}
		s.clientCAs.mu.Unlock()
		if err := call(other.clientCert(t, "new", x509.ExtKeyUsageClientAuth)); err != nil {
			t.Errorf("certificate of the new CA: %v", err)
		}
		s.clientCAs.mu.Lock()
		s.clientCAs.checked = time.Time{}
		s.clientCAs.mu.Unlock()
		if err := call(trusted.clientCert(t, "old", x509.ExtKeyUsageClientAuth)); err == nil {
			t.Error("certificate of the replaced CA still accepted")
		}
	})

	t.Run("probes are served without a certificate on ProbeHandler", func(t *testing.T) {
		if code, _ := probe(s.ProbeHandler(), ReadyzPath); code != http.StatusOK {
			t.Errorf("readyz: %d", code)
		}
		if code, _ := probe(s.ProbeHandler(), "/allow"); code != http.StatusNotFound {
			t.Errorf("admission path on the probe handler: %d, want 404", code)
		}
	})
}

// TestReadBodyChargesWhatArrived checks that a body is charged as it
// arrives: a client that announces 7 MiB and sends ten bytes holds a few
// KiB of the budget, and a whole body of announced length is charged at
// most three times its length.
func TestReadBodyChargesWhatArrived(t *testing.T) {
	var charged int64
	reserve := func(n int64) error { charged += n; return nil }
	stalled := io.MultiReader(strings.NewReader("0123456789"), iotestErrReader{os.ErrDeadlineExceeded})
	if _, err := readBody(stalled, 7<<20, 7<<20, reserve, nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("readBody of a stalled body: %v", err)
	}
	if charged > 2*firstBodyChunk {
		t.Errorf("a stalled body of 10 bytes charged %d bytes, want at most %d", charged, 2*firstBodyChunk)
	}
	// Readers that return a byte at a time, or the last bytes with EOF,
	// reach the buffer's edges in every way.
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"data+EOF": iotest.DataErrReader,
	}
	for _, size := range []int{0, 1, 100, firstBodyChunk - 1, firstBodyChunk, firstBodyChunk + 1, 4*firstBodyChunk + 1, 1 << 20, 7 << 20} {
		for _, announced := range []int64{int64(size), -1} {
			for rname, reader := range readers {
				if rname == "one byte" && size > 1<<20 {
					continue // slow, and no edge the others do not reach
				}
				body := bytes.Repeat([]byte("x"), size)
				for i := range body {
					body[i] = byte(i)
				}
				// A pacer whose deadlines grow by the byte records them.
				rec := &deadlineRecorder{}
				pacer := &bodyPacer{rc: http.NewResponseController(rec), grace: 0, limit: time.Hour, rate: float64(time.Second)}
				got, err := readBody(reader(bytes.NewReader(body)), announced, 7<<20, func(int64) error { return nil }, pacer)
				paced := rec.paced()
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("readBody(%d bytes, announced %d, %s reader) = %d bytes, %v", size, announced, rname, len(got), err)
				}
				// pace hears of the bytes as they arrive, never of more.
				if !slices.IsSorted(paced) || (len(paced) > 0 && paced[len(paced)-1] > int64(size)) || (len(paced) == 0 && size > 0 && rname != "data+EOF") {
					t.Fatalf("readBody(%d bytes, announced %d, %s reader) paced %v", size, announced, rname, paced)
				}
			}
			charged = 0
			body := bytes.Repeat([]byte("x"), size)
			got, err := readBody(bytes.NewReader(body), announced, 7<<20, reserve, nil)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("readBody(%d bytes, announced %d) = %d bytes, %v", size, announced, len(got), err)
			}
			limit := int64(3*size + 2*firstBodyChunk)
			if announced < 0 {
				// Growing fourfold without knowing the end may charge a
				// buffer four times what arrives.
				limit = int64(12*size + 2*firstBodyChunk)
			}
			if charged > limit {
				t.Errorf("body of %d bytes (announced %d) charged %d, more than %d", size, announced, charged, limit)
			}
		}
	}
	refuse := func(int64) error { return ErrOverloaded }
	if _, err := readBody(strings.NewReader("{}"), 2, 100, refuse, nil); !errors.Is(err, ErrOverloaded) {
		t.Errorf("readBody with no budget: %v, want ErrOverloaded", err)
	}
}

// deadlineRecorder is a ResponseWriter that records its read deadlines.
type deadlineRecorder struct {
	http.ResponseWriter
	deadlines []time.Time
}

func (r *deadlineRecorder) SetReadDeadline(d time.Time) error {
	r.deadlines = append(r.deadlines, d)
	return nil
}

// paced returns the bytes each deadline was earned by: one nanosecond a
// byte from the zero time.
func (r *deadlineRecorder) paced() []int64 {
	var n []int64
	for _, d := range r.deadlines {
		n = append(n, int64(d.Sub(time.Time{})))
	}
	return n
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// TestRefusedBodyIsReadToItsEnd checks that a request refused for the
// memory budget (429) is answered after its body is read, over a real
// connection: the client writes the whole body, reads the 429, and its
// connection serves the next request. Answered unread, a body over 256
// KiB makes net/http close the connection, and the client, still writing,
// is reset (the kube-apiserver then fails the admission instead of
// retrying the 429).
func TestRefusedBodyIsReadToItsEnd(t *testing.T) {
	const bodyLimit = 2 << 20
	budget := 2*bodyReservation(bodyLimit) + 100<<10
	small := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)
	hog := newBlockingController(budget - bodyReservation(int64(len(small))) - 10000)
	s := newTestServer(t, Options{MaxRequestBodyBytes: bodyLimit, MaxInFlightMemory: budget}, hog)
	srv := httptest.NewServer(s)
	defer srv.Close()
	held := make(chan error, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/block", "application/json", bytes.NewReader(small))
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	<-hog.entered

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	large := bytes.Repeat([]byte(" "), 3<<19) // 1.5 MiB
	written := make(chan error, 1)
	go func() {
		_, err := fmt.Fprintf(conn, "POST /block HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(large))
		if err == nil {
			_, err = conn.Write(large)
		}
		written <- err
	}()
	replies := bufio.NewReader(conn)
	resp, err := http.ReadResponse(replies, nil)
	if err != nil {
		t.Fatalf("read the answer to the refused request: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Connection") == "close" {
		t.Errorf("refused request: %s, Connection %q; want 429 on a connection kept open", resp.Status, resp.Header.Get("Connection"))
	}
	if err := <-written; err != nil {
		t.Fatalf("write the refused request's body: %v", err)
	}

	close(hog.release)
	if err := <-held; err != nil {
		t.Fatalf("held request: %v", err)
	}
	if _, err := fmt.Fprintf(conn, "POST /block HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(small), small); err != nil {
		t.Fatalf("next request on the connection: %v", err)
	}
	next, err := http.ReadResponse(replies, nil)
	if err != nil {
		t.Fatalf("next request on the connection: %v", err)
	}
	next.Body.Close()
	if next.StatusCode != http.StatusOK {
		t.Errorf("next request on the connection: %s, want 200", next.Status)
	}
}
