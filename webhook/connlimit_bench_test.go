package webhook

import (
	"net"
	"net/http"
	"testing"
)

// BenchmarkConnLimiterRequest is what connLimiter costs one admission on
// a kept-alive connection: the request's headers (StateActive), its body
// in (deciding) and the answer sent (StateIdle).
func BenchmarkConnLimiterRequest(b *testing.B) {
	l := newConnLimiter(DefaultOptions(), idleTimeout)
	c := l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.1")}}, nil)
	l.handshaken(c)
	for range 100 {
		l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.2")}}, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		l.connState(c, http.StateActive)
		l.deciding(c)
		l.connState(c, http.StateIdle)
	}
}
