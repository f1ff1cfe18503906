package webhook

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter caps the connections the server holds open at once. Each
// costs a goroutine and TLS and HTTP buffers (tens of KiB), so without a cap
// anyone who can reach the port grows the process by opening connections
// and never finishing a request.
//
// When a new connection arrives at the cap, the connection idle longest is
// closed to make room: a kept-alive one between requests (clients retry a
// request on a fresh connection when an idle one closes), or one that has
// sent nothing for newConnGrace since it opened. When none is idle, the new
// connection waits, in the kernel's accept queue and in Accept, until one
// closes. Connections busy with a request are never cut: the server's read
// and write timeouts end those.
type connLimiter struct {
	tokens chan struct{} // one per open connection
	done   chan struct{} // closed with the listener

	mu   sync.Mutex
	idle map[*limitedConn]idleConn
}

// idleConn is when a connection turned idle, and whether it has yet to
// send its first request.
type idleConn struct {
	since time.Time
	fresh bool
}

// newConnGrace is how long a new connection may stay silent before it
// counts as idle: far longer than a client takes between connecting and
// sending its request, so only connections opened and left unused are cut.
const newConnGrace = time.Second

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{
		tokens: make(chan struct{}, max),
		done:   make(chan struct{}),
		idle:   map[*limitedConn]idleConn{},
	}
}

// limitedListener is a listener whose connections count against a
// connLimiter.
type limitedListener struct {
	net.Listener
	l         *connLimiter
	closeOnce sync.Once
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case ln.l.tokens <- struct{}{}:
			return &limitedConn{Conn: c, l: ln.l}, nil
		default:
		}
		if ln.l.closeOldestIdle() {
			continue
		}
		select {
		case ln.l.tokens <- struct{}{}:
			return &limitedConn{Conn: c, l: ln.l}, nil
		case <-ln.l.done:
			c.Close()
			return nil, net.ErrClosed
		case <-time.After(idlePoll):
			// A connection may have turned idle without freeing a token.
		}
	}
}

// idlePoll is how often an Accept waiting at the cap looks again for an
// idle connection to close.
const idlePoll = 100 * time.Millisecond

func (ln *limitedListener) Close() error {
	ln.closeOnce.Do(func() { close(ln.l.done) })
	return ln.Listener.Close()
}

// closeOldestIdle closes the connection idle longest and reports whether
// there was one.
func (l *connLimiter) closeOldestIdle() bool {
	l.mu.Lock()
	var oldest *limitedConn
	var since time.Time
	now := time.Now()
	for c, ic := range l.idle {
		if ic.fresh && now.Sub(ic.since) < newConnGrace {
			continue
		}
		if oldest == nil || ic.since.Before(since) {
			oldest, since = c, ic.since
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// connState is http.Server.ConnState: it tracks which connections are idle.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateNew || state == http.StateIdle {
		l.idle[lc] = idleConn{since: time.Now(), fresh: state == http.StateNew}
	} else {
		delete(l.idle, lc)
	}
}

// limitedConn gives its token back when it closes, once.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		<-c.l.tokens
	})
	return err
}
