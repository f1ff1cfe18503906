package webhook

import (
	"container/heap"
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter caps the connections the server holds open, in all
// (Options.MaxConnections) and from one peer address
// (Options.MaxConnectionsPerPeer). Each costs a goroutine and TLS and HTTP
// buffers, so without a cap anyone who reaches the port grows the process
// by opening connections and never finishing a request.
//
// A connection at the cap does not wait for room: waiting fills the
// kernel's accept queue, where the kube-apiserver's next connection would
// wait behind the flood (and, once the queue is full, its SYN is dropped
// and retried a second later). The new connection is accepted at once and
// the connection that is due soonest is closed to make room: each
// connection not busy deciding an admission has a due time, when it will
// be closed anyway unless it makes progress (its handshake's deadline,
// its headers' deadline, the deadline its body's pace has earned, or the
// end of its idle time between requests), and at the cap the one with the
// least of that time left goes. A peer that stalls, trickles or sits on
// a fresh connection is therefore always due before one that is getting
// through its request, and before the kept-alive connections that
// answered requests (due only at IdleTimeout), so a caller that moves
// its request along, as the kube-apiserver does, is not the one cut.
// With client authentication, connections still in the handshake (no
// caller proven yet) all go before any authenticated one.
//
// The peer cap applies the same choice within one address, so that a peer
// churning connections as fast as it can cuts only its own. Connections
// busy deciding an admission are never cut: at a cap where every
// connection is busy, the new one waits for one to end (which takes as
// long as a decision; at the global cap it is only possible when
// MaxConnections is near MaxAdmissionsInFlight, at a peer's when that
// peer has MaxConnectionsPerPeer admissions being decided).
type connLimiter struct {
	max, perPeer int
	// handshake and header are the deadlines of a connection's handshake
	// and of each request's headers; idle is the server's IdleTimeout.
	handshake, header, idle time.Duration
	// authenticated: handshaken connections outrank all others.
	authenticated bool
	now           func() time.Time
	// freed is signalled when a connection ends or stops being busy, for
	// an Accept waiting at the cap.
	freed chan struct{}
	// shed counts the connections closed to make room, for tests.
	shed atomic.Int64

	mu    sync.Mutex
	count int
	all   dueHeap
	peers map[netip.Addr]*peerConns
}

// peerConns are the open connections of one peer address.
type peerConns struct {
	addr  netip.Addr
	count int
	due   dueHeap
}

func newConnLimiter(o Options, idle time.Duration) *connLimiter {
	return &connLimiter{
		max:           o.MaxConnections,
		perPeer:       min(o.MaxConnectionsPerPeer, o.MaxConnections),
		handshake:     o.HandshakeTimeout,
		header:        min(o.ReadHeaderTimeout, o.ReadTimeout),
		idle:          idle,
		authenticated: o.ClientCAFile != "",
		now:           time.Now,
		freed:         make(chan struct{}, 1),
		all:           dueHeap{slot: 0},
		peers:         map[netip.Addr]*peerConns{},
	}
}

// trackedConn is an accepted connection counted by a connLimiter. Its
// fields other than Conn, l and peer are guarded by l.mu.
type trackedConn struct {
	net.Conn
	l    *connLimiter
	peer *peerConns

	due time.Time
	// pos is the connection's index in l.all and in peer.due; -1 when it
	// is in neither (busy, or forgotten).
	pos     [2]int
	counted bool
	// shaken is set once the TLS handshake is done.
	shaken bool
	// busy counts the admissions being decided on the connection (one
	// for HTTP/1.1; HTTP/2 may decide several).
	busy int
	// idle is set while the connection waits between requests, so that
	// Read notices, without the lock, the first bytes of the next one.
	idle      atomic.Bool
	closeOnce sync.Once
}

// admit counts raw against the caps, closing the connection due soonest
// when one is full, and returns it tracked, due at its handshake's
// deadline. At a cap where every connection is busy it waits for one to
// end; it returns nil, having closed raw, when done is closed meanwhile.
func (l *connLimiter) admit(raw net.Conn, done <-chan struct{}) *trackedConn {
	addr := peerAddr(raw)
	for {
		l.mu.Lock()
		victims, room := l.makeRoom(addr)
		var c *trackedConn
		if room {
			c = l.add(raw, addr)
		}
		l.mu.Unlock()
		for _, v := range victims {
			l.shed.Add(1)
			v.Conn.Close()
		}
		if c != nil {
			return c
		}
		select {
		case <-l.freed:
		case <-done:
			raw.Close()
			return nil
		}
	}
}

// makeRoom forgets, and returns to be closed, what must go for a new
// connection from addr: the soonest due of addr's own at the peer cap,
// and the soonest due of all at the global cap. room reports whether the
// new connection now fits.
func (l *connLimiter) makeRoom(addr netip.Addr) (victims []*trackedConn, room bool) {
	if p := l.peers[addr]; p != nil && p.count >= l.perPeer {
		if p.due.Len() == 0 {
			return nil, false
		}
		v := p.due.conns[0]
		l.forget(v)
		victims = append(victims, v)
	}
	if l.count >= l.max {
		if l.all.Len() == 0 {
			return victims, false
		}
		v := l.all.conns[0]
		l.forget(v)
		victims = append(victims, v)
	}
	return victims, true
}

// add counts a new connection; l.mu is held.
func (l *connLimiter) add(raw net.Conn, addr netip.Addr) *trackedConn {
	p := l.peers[addr]
	if p == nil {
		p = &peerConns{addr: addr, due: dueHeap{slot: 1}}
		l.peers[addr] = p
	}
	c := &trackedConn{Conn: raw, l: l, peer: p, counted: true, pos: [2]int{-1, -1}}
	c.due = l.now().Add(l.handshake)
	l.count++
	p.count++
	l.insert(c)
	return c
}

// forget stops counting c; l.mu is held. Closing c is the caller's.
func (l *connLimiter) forget(c *trackedConn) {
	if !c.counted {
		return
	}
	c.counted = false
	l.remove(c)
	l.count--
	if c.peer.count--; c.peer.count == 0 {
		delete(l.peers, c.peer.addr)
	}
	l.signal()
}

func (l *connLimiter) signal() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

func (l *connLimiter) insert(c *trackedConn) {
	if c.pos[0] < 0 {
		heap.Push(&l.all, c)
		heap.Push(&c.peer.due, c)
	}
}

func (l *connLimiter) remove(c *trackedConn) {
	if c.pos[0] >= 0 {
		heap.Remove(&l.all, c.pos[0])
		heap.Remove(&c.peer.due, c.pos[1])
	}
}

// setDue makes c due at due and, unless it is busy, a candidate to cut.
func (l *connLimiter) setDue(c *trackedConn, due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setDueLocked(c, due)
}

func (l *connLimiter) setDueLocked(c *trackedConn, due time.Time) {
	if !c.counted {
		return
	}
	c.due = due
	if c.busy > 0 {
		return
	}
	if c.pos[0] < 0 {
		l.insert(c)
		return
	}
	heap.Fix(&l.all, c.pos[0])
	heap.Fix(&c.peer.due, c.pos[1])
}

// handshaken marks c's handshake done: its first request's headers are
// due next.
func (l *connLimiter) handshaken(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.shaken = true
	l.setDueLocked(c, l.now().Add(l.header))
}

// deciding marks an admission being decided on c: c is not cut until
// the server is done with it (connState then makes it idle).
func (l *connLimiter) deciding(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.counted {
		c.busy++
		l.remove(c)
	}
}

// connState is http.Server.ConnState: a request whose headers are in has
// ReadHeaderTimeout for its body to start (decode then paces it); an
// idle connection is due at the end of its idle time.
func (l *connLimiter) connState(nc net.Conn, state http.ConnState) {
	c := trackedOf(nc)
	if c == nil {
		return
	}
	switch state {
	case http.StateActive:
		c.idle.Store(false)
		l.setDue(c, l.now().Add(l.header))
	case http.StateIdle:
		c.idle.Store(true)
		l.mu.Lock()
		c.busy = 0
		l.setDueLocked(c, l.now().Add(l.idle))
		l.mu.Unlock()
		l.signal()
	}
}

// Read notices a kept-alive connection's next request: its headers are
// then due within ReadHeaderTimeout, as net/http enforces.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.idle.Load() && c.idle.CompareAndSwap(true, false) {
		c.l.setDue(c, c.l.now().Add(c.l.header))
	}
	return n, err
}

// Close closes the connection and stops counting it, once.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return err
}

// trackedOf returns the trackedConn under nc, a *tls.Conn the server
// serves, or nil.
func trackedOf(nc net.Conn) *trackedConn {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = u.NetConn()
	}
	c, _ := nc.(*trackedConn)
	return c
}

// connKey carries a request's trackedConn in its context.
type connKey struct{}

// connContext is http.Server.ConnContext: the handler finds the
// connection it paces and marks busy.
func connContext(ctx context.Context, nc net.Conn) context.Context {
	if c := trackedOf(nc); c != nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

func connFrom(ctx context.Context) *trackedConn {
	c, _ := ctx.Value(connKey{}).(*trackedConn)
	return c
}

// peerAddr is c's remote IP address; connections whose address is not
// TCP share the zero address.
func peerAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// dueHeap orders connections by due time, soonest first; with client
// authentication, connections still in their handshake come before all
// handshaken ones. slot is the index of trackedConn.pos it maintains.
type dueHeap struct {
	conns []*trackedConn
	slot  int
}

func (h *dueHeap) Len() int { return len(h.conns) }

func (h *dueHeap) Less(i, j int) bool {
	a, b := h.conns[i], h.conns[j]
	if a.l.authenticated && a.shaken != b.shaken {
		return !a.shaken
	}
	return a.due.Before(b.due)
}

func (h *dueHeap) Swap(i, j int) {
	h.conns[i], h.conns[j] = h.conns[j], h.conns[i]
	h.conns[i].pos[h.slot] = i
	h.conns[j].pos[h.slot] = j
}

func (h *dueHeap) Push(x any) {
	c := x.(*trackedConn)
	c.pos[h.slot] = len(h.conns)
	h.conns = append(h.conns, c)
}

func (h *dueHeap) Pop() any {
	n := len(h.conns) - 1
	c := h.conns[n]
	h.conns[n] = nil
	h.conns = h.conns[:n]
	c.pos[h.slot] = -1
	return c
}
