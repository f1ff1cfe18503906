package webhook

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// slowPeerServer serves allowAll at /allow, and the blocking controller
// ctrl when given, with opts, on loopback.
func slowPeerServer(t *testing.T, opts Options, controllers ...Admitter) (*Server, string, *testPKI) {
	t.Helper()
	pki := newTestPKI(t)
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, pki.servingData(t, time.Now(), time.Hour))
	opts.GracePeriod = -1
	s, err := New(opts, secrets, append([]Admitter{allowAll("/allow")}, controllers...)...)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, s)
	return s, addr, pki
}

// dialFrom opens a TLS connection to addr from the loopback address
// local ("" for any).
func dialFrom(t *testing.T, local, addr string, roots *testPKI) *tls.Conn {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots.pool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantOK fails t unless an admission, what, was answered 200; it reads
// the answer's body to its end, so its connection can carry the next.
func wantOK(t *testing.T, what string, resp *http.Response, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", what, resp.Status)
	}
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("still open after %v", d)
	}
	return nil
}

// TestSlowPeersAreShedAtTheCap holds the connection cap with peers that
// stall at every stage of a request and checks that a caller moving its
// request along gets through at once, that its kept-alive connection is
// not the one cut, and that connections deciding are never cut.
func TestSlowPeersAreShedAtTheCap(t *testing.T) {
	body := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)
	s, addr, pki := slowPeerServer(t, Options{MaxConnections: 4})
	var reused []bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool()}}}
	admit := func(what string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/allow", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := client.Do(req)
		wantOK(t, what, resp, err)
	}
	admit("first request")

	// Three stalled peers fill the cap beside the client's kept-alive
	// connection: a half-sent body, half-sent headers, a silent TLS
	// connection.
	dialFrom(t, "", addr, pki).Write([]byte("POST /allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"))
	dialFrom(t, "", addr, pki).Write([]byte("POST /allow HTTP/1.1\r\nHost: x\r\n"))
	dialFrom(t, "", addr, pki)
	// Each new peer sheds one of them, never the kept-alive connection.
	for i := range 6 {
		dialFrom(t, "", addr, pki)
		admit(fmt.Sprintf("request %d beside stalled peers", i))
	}
	for i, r := range reused[1:] {
		if !r {
			t.Errorf("request %d opened a new connection: the kept-alive one was cut", i+1)
		}
	}
	if n := s.conns.Load().shed.Load(); n < 6 {
		t.Errorf("%d connections shed for 6 new ones at the cap", n)
	}
}

// TestConnectionsDecidingAreNotCut fills the cap with admissions being
// decided: a new connection waits for one to end instead of cutting it.
func TestConnectionsDecidingAreNotCut(t *testing.T) {
	ctrl := newBlockingController(0)
	_, addr, pki := slowPeerServer(t, Options{MaxConnections: 2}, ctrl)
	answers := make(chan string, 2)
	review := string(reviewJSON(t, admissionV1, "uid", []byte(`{}`), false))
	for range 2 {
		go func() { answers <- rawPost(t, addr, pki.pool(), len(review), review) }()
		<-ctrl.entered
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	tc := tls.Client(third, &tls.Config{RootCAs: pki.pool()})
	tc.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if err := tc.Handshake(); err == nil {
		t.Fatal("a third connection was served while two admissions being decided held the cap")
	}
	close(ctrl.release)
	for range 2 {
		if got := <-answers; got != "HTTP/1.1 200 OK" {
			t.Errorf("a decided admission was answered %q, want 200: it was cut", got)
		}
	}
}

// TestPeerCapRefusesUnprovenAndCutsProven floods the port from one
// address that has sent no admission: at its cap its new connections are
// reset before any TLS and the ones it holds are left to their
// deadlines. An address that has sent an admission floods next: at its
// cap it cuts its own connections, never the kept-alive one that
// answered, and another address's silent connection, due sooner, stays
// throughout.
func TestPeerCapRefusesUnprovenAndCutsProven(t *testing.T) {
	s, addr, pki := slowPeerServer(t, Options{MaxConnections: 100, MaxConnectionsPerPeer: 3})
	other := dialFrom(t, "127.0.0.1", addr, pki)
	var held []*tls.Conn
	refused := 0
	for range 10 {
		d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pki.pool()})
		if err != nil {
			refused++
			continue
		}
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	if refused != 7 {
		t.Errorf("%d of an unproven address's 10 connections refused, want 7 (cap 3)", refused)
	}
	for i, c := range held {
		if closedWithin(c, 50*time.Millisecond) == nil {
			t.Errorf("held connection %d of the unproven address was cut", i)
		}
	}
	limiter := s.conns.Load()
	if n, r := limiter.shed.Load(), limiter.refused.Load(); n != 0 || r != 7 {
		t.Errorf("shed %d, refused %d; want 0 and 7", n, r)
	}

	// The prover sends an admission before each of the flood's
	// connections, as a kube-apiserver in use does: its kept-alive
	// connection is never a spare (idle for quietFor).
	review := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)
	prover := dialFrom(t, "127.0.0.3", addr, pki)
	answers := bufio.NewReader(prover)
	admit := func(what string) {
		t.Helper()
		fmt.Fprintf(prover, "POST /allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(review), review)
		prover.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(answers, nil)
		wantOK(t, "admission from 127.0.0.3 "+what+" (a failure means its kept-alive connection was cut)", resp, err)
	}
	admit("before the flood")
	var flood []*tls.Conn
	for i := range 10 {
		flood = append(flood, dialFrom(t, "127.0.0.3", addr, pki))
		admit(fmt.Sprintf("after the flood's connection %d", i))
	}
	closed := 0
	for _, c := range flood {
		if closedWithin(c, 50*time.Millisecond) == nil {
			closed++
		}
	}
	if closed != 8 {
		t.Errorf("%d of a proven address's 10 new connections cut, want 8 (cap 3, one kept alive)", closed)
	}
	if err := closedWithin(other, 50*time.Millisecond); err == nil {
		t.Error("the other address's connection was cut by the floods")
	}
}

// TestStallDeadlines checks each stage's deadline on its own: a peer that
// never finishes its handshake, one that never finishes its headers, and
// one that sends its body slower than MinBodyRate are closed (the last
// answered 408 naming the setting), while a body arriving over longer
// than ReadHeaderTimeout at the pace is admitted.
func TestStallDeadlines(t *testing.T) {
	opts := Options{HandshakeTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond, MinBodyRate: 1000}
	_, addr, pki := slowPeerServer(t, opts)
	for _, tc := range []struct {
		name string
		open func() net.Conn
	}{
		{"no handshake", func() net.Conn {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"half a ClientHello", func() net.Conn {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01})
			return c
		}},
		{"silent after the handshake", func() net.Conn { return dialFrom(t, "", addr, pki) }},
		{"headers that do not end", func() net.Conn {
			c := dialFrom(t, "", addr, pki)
			c.Write([]byte("POST /allow HTTP/1.1\r\nHost: x\r\n"))
			return c
		}},
	} {
		start := time.Now()
		if err := closedWithin(tc.open(), 5*time.Second); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		} else if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("%s: closed after %v, before its deadline", tc.name, d)
		}
	}

	review := reviewJSON(t, admissionV1, "uid", []byte(`{}`), false)
	send := func(gap time.Duration, chunk int) string {
		c := dialFrom(t, "", addr, pki)
		fmt.Fprintf(c, "POST /allow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(review))
		for rest := review; len(rest) > 0; {
			n := min(chunk, len(rest))
			if _, err := c.Write(rest[:n]); err != nil {
				break
			}
			rest = rest[n:]
			time.Sleep(gap)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.Status + ": " + string(msg)
	}
	// 20 bytes every 100 ms is 200 bytes a second, a fifth of the pace.
	if got := send(100*time.Millisecond, 20); !strings.HasPrefix(got, "408") || !strings.Contains(got, "Options.MinBodyRate") {
		t.Errorf("a body slower than MinBodyRate was answered %q, want a 408 naming the setting", got)
	}
	// 100 bytes every 50 ms is twice the pace, over more than
	// ReadHeaderTimeout for a review of a few hundred bytes.
	if got := send(50*time.Millisecond, 100); !strings.HasPrefix(got, "200") {
		t.Errorf("a body at twice MinBodyRate was answered %q, want 200", got)
	}
}

// TestFailingHandshakesGetResetBelowTheCap checks that, far below the
// caps, an unproven address holding unprovenGrace connections whose
// handshake just failed has its next connection reset before any TLS,
// while another address still gets in.
func TestFailingHandshakesGetResetBelowTheCap(t *testing.T) {
	s, addr, pki := slowPeerServer(t, Options{MaxConnections: 100})
	for range unprovenGrace {
		dialFrom(t, "127.0.0.2", addr, pki)
	}
	// dialRaw connects from local without TLS; the error is the
	// connection's reset when the server resets it at once.
	dialRaw := func(local string) (net.Conn, error) {
		d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", addr)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	// Not TLS: the handshake fails at once.
	bad, err := dialRaw("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(bad, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := closedWithin(bad, 5*time.Second); err != nil {
		t.Fatalf("a connection sending no TLS: %v", err)
	}
	limiter := s.conns.Load()
	if c, err := dialRaw("127.0.0.2"); err == nil {
		if err := closedWithin(c, time.Second); err != nil {
			t.Errorf("a new connection from the failing address: %v, want reset", err)
		}
	}
	if n := limiter.refused.Load(); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	dialFrom(t, "127.0.0.3", addr, pki)
}
