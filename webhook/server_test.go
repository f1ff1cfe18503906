package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
)

// startServer serves s on a loopback port until the test ends and returns
// its address and a stop function that returns Serve's result.
func startServer(t *testing.T, s *Server) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

func tlsClient(roots *x509.CertPool, maxVersion uint16, http2 bool) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, MaxVersion: maxVersion},
			ForceAttemptHTTP2: http2,
			DisableKeepAlives: true,
		},
	}
}

func TestServeTLSVersionsAndProtocols(t *testing.T) {
	tests := []struct {
		name         string
		opts         Options
		clientMaxTLS uint16
		clientHTTP2  bool
		wantErr      string
		wantProto    string
		wantTLS      uint16
	}{
		{name: "TLS 1.3 by default", wantProto: "HTTP/1.1", wantTLS: tls.VersionTLS13},
		{name: "TLS 1.2 client refused by default", clientMaxTLS: tls.VersionTLS12, wantErr: "protocol version not supported"},
		{name: "TLS 1.2 allowed by option", opts: Options{TLSMinVersion: tls.VersionTLS12}, clientMaxTLS: tls.VersionTLS12, wantProto: "HTTP/1.1", wantTLS: tls.VersionTLS12},
		{name: "HTTP/2 off by default", clientHTTP2: true, wantProto: "HTTP/1.1", wantTLS: tls.VersionTLS13},
		{name: "HTTP/2 by option", opts: Options{EnableHTTP2: true}, clientHTTP2: true, wantProto: "HTTP/2.0", wantTLS: tls.VersionTLS13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pki := newTestPKI(t)
			secrets := &secretMap{}
			secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
			tt.opts.GracePeriod = -1
			s, err := New(tt.opts, secrets)
			if err != nil {
				t.Fatal(err)
			}
			addr, _ := startServer(t, s)
			resp, err := tlsClient(pki.pool(), tt.clientMaxTLS, tt.clientHTTP2).Get("https://" + addr + HealthzPath)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GET error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			type got struct {
				Code  int
				Proto string
				TLS   uint16
			}
			if diff := cmp.Diff(got{200, tt.wantProto, tt.wantTLS}, got{resp.StatusCode, resp.Proto, resp.TLS.Version}); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCertificateRotationWithoutRestart(t *testing.T) {
	pki := newTestPKI(t)
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	s, err := New(Options{GracePeriod: -1}, secrets)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, s)
	client := tlsClient(pki.pool(), 0, false)
	servedSerial := func() string {
		t.Helper()
		resp, err := client.Get("https://" + addr + ReadyzPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}

	first := servedSerial()
	for range 20 {
		if got := servedSerial(); got != first {
			t.Fatalf("serial changed without a Secret update: %s then %s", first, got)
		}
	}
	if n := s.certs.parsedCount.Load(); n != 1 {
		t.Errorf("Secret parsed %d times over 21 handshakes of one resourceVersion, want 1", n)
	}

	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	second := servedSerial()
	if second == first {
		t.Errorf("rotated certificate not served: still serial %s", first)
	}
	servedSerial()
	if n := s.certs.parsedCount.Load(); n != 2 {
		t.Errorf("Secret parsed %d times over two resourceVersions, want 2", n)
	}
}

func TestCertSourceFallsBackToLastGoodCertificate(t *testing.T) {
	pki := newTestPKI(t)
	now := time.Now()
	k := DefaultOptions().Keys
	tests := []struct {
		name    string
		change  func(*secretMap)
		at      time.Time
		wantErr string // empty: the last good certificate is served
	}{
		{"update does not parse", func(m *secretMap) { m.Set("s", map[string][]byte{k.ServerCert: []byte("x"), k.ServerKey: []byte("y")}) }, now, ""},
		{"update lacks the key", func(m *secretMap) { m.Set("s", map[string][]byte{}) }, now, ""},
		{"Secret deleted", func(m *secretMap) { m.Delete("s") }, now, ""},
		{"Secret deleted and last good expired", func(m *secretMap) { m.Delete("s") }, now.Add(2 * time.Hour), `secrets "s" not found`},
		{"Secret expired, no other", func(*secretMap) {}, now.Add(2 * time.Hour), "expired at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := &secretMap{}
			secrets.Set("s", pki.servingData(t, now, time.Hour))
			clock := now
			c := &certSource{secrets: secrets, name: "s", certKey: k.ServerCert, keyKey: k.ServerKey, now: func() time.Time { return clock }, logger: zap.NewNop()}
			good, err := c.get()
			if err != nil {
				t.Fatal(err)
			}
			tt.change(secrets)
			clock = tt.at
			got, err := c.get()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("get error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != good {
				t.Errorf("get = %v, %v; want the last good certificate", got, err)
			}
		})
	}
}

func TestShutdownFailsReadinessThenDrains(t *testing.T) {
	pki := newTestPKI(t)
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	entered, release := make(chan struct{}), make(chan struct{})
	slow := &funcController{path: "/slow", admit: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		close(entered)
		<-release
		return Allowed()
	}}
	s, err := New(Options{GracePeriod: 300 * time.Millisecond}, secrets, slow)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startServer(t, s)
	client := tlsClient(pki.pool(), 0, false)

	inFlight := make(chan int, 1)
	go func() {
		resp, err := client.Post("https://"+addr+"/slow", "application/json", bytes.NewReader(reviewJSON(t, admissionV1, "u", []byte(`{}`), false)))
		if err != nil {
			inFlight <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inFlight <- resp.StatusCode
	}()
	<-entered

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// During the grace period the server still answers, but unready.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Get("https://" + addr + ReadyzPath)
		if err != nil {
			t.Fatalf("/readyz during the grace period: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.TrimSpace(string(body)) == "shutting down" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never reported shutting down; last %d %q", resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned (%v) while a request was in flight", err)
	case <-time.After(400 * time.Millisecond): // past the grace period, now draining
	}

	close(release)
	if code := <-inFlight; code != http.StatusOK {
		t.Errorf("in-flight request ended with %d, want 200", code)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
	if _, err := client.Get("https://" + addr + HealthzPath); err == nil {
		t.Errorf("server still accepts connections after Serve returned")
	}
}

// TestShutdownAnswersOnIdleConnections holds a kept-alive connection idle
// as the server begins to shut down, then sends a request on it: the
// request is answered, and the answer closes the connection. (Closing
// idle connections when the shutdown begins made such a request fail with
// a broken pipe or EOF, which the kube-apiserver reports as a refused
// create.)
func TestShutdownAnswersOnIdleConnections(t *testing.T) {
	pki := newTestPKI(t)
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	s, err := New(Options{GracePeriod: 2 * time.Second}, secrets)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startServer(t, s)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reader := bufio.NewReader(conn)
	get := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+HealthzPath, nil)
		if err := req.Write(conn); err != nil {
			return nil, err
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(reader, req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	type answer struct {
		Code  int
		Close bool
	}
	first, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(answer{200, false}, answer{first.StatusCode, first.Close}); diff != "" {
		t.Fatalf("answer before the shutdown (-want +got):\n%s", diff)
	}

	go stop()
	for !s.draining.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // what closed idle connections has run
	second, err := get()
	if err != nil {
		t.Fatalf("request on a connection idle when the shutdown began: %v", err)
	}
	if diff := cmp.Diff(answer{200, true}, answer{second.StatusCode, second.Close}); diff != "" {
		t.Errorf("answer during the grace period (-want +got):\n%s", diff)
	}
}

// leaver is a controller that says, when asked to leave the path, whether
// it could, after the time it takes.
type leaver struct {
	funcController
	took  time.Duration
	could bool
	asked atomic.Int32
}

func (l *leaver) LeavePath(ctx context.Context) bool {
	l.asked.Add(1)
	select {
	case <-time.After(l.took):
		return l.could
	case <-ctx.Done():
		return false
	}
}

// TestShutdownSkipsTheGraceOnceEveryControllerLeftThePath: the grace
// period is for callers to move away; a server whose every controller has
// left the kube-apiserver's path (PathLeaver) drains at once, and one with
// a controller that cannot leave, or is no PathLeaver, waits it out.
func TestShutdownSkipsTheGraceOnceEveryControllerLeftThePath(t *testing.T) {
	allow := func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return Allowed() }
	for _, tc := range []struct {
		name      string
		leavers   []*leaver
		plain     bool
		wantGrace bool
	}{
		{name: "every controller leaves", leavers: []*leaver{{took: 50 * time.Millisecond, could: true}, {took: 200 * time.Millisecond, could: true}}},
		{name: "one cannot leave", leavers: []*leaver{{took: 10 * time.Millisecond, could: true}, {could: false}}, wantGrace: true},
		{name: "one is no PathLeaver", leavers: []*leaver{{could: true}}, plain: true, wantGrace: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pki := newTestPKI(t)
			secrets := &secretMap{}
			secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
			var controllers []Admitter
			for i, l := range tc.leavers {
				l.funcController = funcController{path: fmt.Sprintf("/l%d", i), admit: allow}
				controllers = append(controllers, l)
			}
			if tc.plain {
				controllers = append(controllers, &funcController{path: "/plain", admit: allow})
			}
			// A grace period the test sees the server wait, or not.
			grace := time.Minute
			if tc.wantGrace {
				grace = 2 * time.Second
			}
			s, err := New(Options{GracePeriod: grace}, secrets, controllers...)
			if err != nil {
				t.Fatal(err)
			}
			_, stop := startServer(t, s)
			stopped := make(chan error, 1)
			go func() { stopped <- stop() }()
			select {
			case err := <-stopped:
				if tc.wantGrace {
					t.Fatalf("Serve returned (%v) before its grace period ended", err)
				}
				for i, l := range tc.leavers {
					if l.asked.Load() != 1 {
						t.Errorf("controller %d asked to leave %d times, want once", i, l.asked.Load())
					}
				}
			case <-time.After(grace / 2):
				if !tc.wantGrace {
					t.Fatalf("Serve still draining %v into a grace period of %v with every controller out of the path", grace/2, grace)
				}
				if err := <-stopped; err != nil {
					t.Errorf("Serve returned %v, want nil", err)
				}
			}
		})
	}
}
