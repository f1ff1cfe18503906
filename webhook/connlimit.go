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
// A connection at a cap does not wait for room: waiting fills the
// kernel's accept queue, where the kube-apiserver's next connection would
// wait behind the flood (and, once the queue is full, its SYN is dropped
// and retried a second later). It is accepted at once, and then either a
// connection already held is closed for it or it is itself closed, reset
// before any TLS. Which, is decide's: it depends on whether the new
// connection's address is proven, that is whether a connection from it
// has had an admission's body read in full or, with client
// authentication, finished its handshake, since the server started (the
// last MaxConnections addresses to prove themselves are remembered).
//
// A proven address's new connection is never refused: a connection is
// closed to make room, chosen by cuttable.victim. A connection not busy
// deciding an admission is either in a stage of a request (its
// handshake, its headers, its body) or kept alive after answering one.
// One in a stage has a due time, when it will be closed anyway unless it
// makes progress (its handshake's deadline, its headers' deadline, the
// deadline its body's pace has earned), and the one with the least of
// that time left goes first: a peer that stalls, trickles or sits on a
// connection is cut before one getting through its request, and before
// the kept-alive connections. But when that connection entered its stage
// less than quietFor ago and a kept-alive one has been idle for
// quietFor, the one idle longest goes instead. A caller's pool hands out
// the connection it used last, so one idle that long is a spare, or belongs
// to a client the caller has dropped (the kube-apiserver builds a new
// client for a webhook each time its caBundle changes, and the old one's
// kept-alive connections, up to 25, sit idle for 90 seconds before it
// closes them), while a connection in its first moments may be the
// kube-apiserver's own, handshaking for an admission that fails if it is
// cut. (Closing a kept-alive connection just as its caller reuses it
// fails that admission too, which is why one in use, idle less than
// quietFor, is not preferred.) With client authentication, connections
// still in the handshake (no caller proven yet) come before all
// authenticated ones in the order of due times.
//
// An unproven address's new connection is refused at its address's cap,
// and at the global cap when that address holds unprovenGrace
// connections already: a cut peer comes back, and each return costs a TLS
// handshake on both sides, on cores the kube-apiserver and etcd share,
// while a refusal costs an accept and a reset, and leaves the connections
// held to their deadlines. An address holding fewer (a kube-apiserver
// replica not seen before, or after a restart, opening its first
// connections at once) still displaces the connection due soonest, and is
// proven by its first admission. Below the caps too, an unproven address
// holding unprovenGrace connections is refused while a handshake of its
// has failed within the last HandshakeTimeout (other than by a cut): with
// client authentication, every handshake of a peer without a certificate
// fails at once and frees its place, so a flood of them would otherwise
// cost a handshake per place per reconnection without ever meeting a cap.
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
	// shed counts the connections closed to make room, refused the new
	// connections closed at once, for the log and tests.
	shed, refused atomic.Int64

	mu    sync.Mutex
	count int
	all   cuttable
	peers map[netip.Addr]*peerConns
	// proven holds the addresses proven since the server started, each
	// with when its last proved connection closed; at most max entries.
	proven map[netip.Addr]time.Time
}

// unprovenGrace is how many connections an unproven address may hold and
// still displace one at the global cap: as many as a kube-apiserver
// replica might open at once before its first admission is read, and far
// fewer than a flood's addresses hold when sharing MaxConnections.
const unprovenGrace = 8

// quietFor is how long a connection stays in one stage of a request (its
// handshake, its headers, its body) before it no longer counts as
// getting through it, and how long a kept-alive connection sits idle
// before it counts as a spare: the kube-apiserver passes each stage
// within milliseconds, and reuses a connection in use within as little,
// and a second leaves room for a busy machine.
const quietFor = time.Second

// peerConns are the open connections of one peer address.
type peerConns struct {
	addr  netip.Addr
	count int
	// proved counts the open connections that proved the address.
	proved int
	// failed is when a handshake from the address last failed, other
	// than by a cut.
	failed time.Time
	due    cuttable
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
		all:           newCuttable(0),
		peers:         map[netip.Addr]*peerConns{},
		proven:        map[netip.Addr]time.Time{},
	}
}

// trackedConn is an accepted connection counted by a connLimiter. Its
// fields other than Conn, l and peer are guarded by l.mu.
type trackedConn struct {
	net.Conn
	l    *connLimiter
	peer *peerConns

	due time.Time
	// since is when the connection entered its stage: accepted,
	// handshaken, request headers in, or kept alive after an answer.
	since time.Time
	// kept is set while it waits, kept alive, for its next request: the
	// kind it is filed under. (idle, below, says the same without the
	// lock for Read, and turns false before Read takes the lock to
	// refile it.)
	kept bool
	// pos is the connection's index in l.all and in peer.due (in the
	// heaps of its kind, kept or in a stage); -1 when it is in neither
	// (busy, or forgotten).
	pos     [2]int
	counted bool
	// shaken is set once the TLS handshake is done; proved once the
	// connection proved its address.
	shaken, proved bool
	// busy counts the admissions being decided on the connection (one
	// for HTTP/1.1; HTTP/2 may decide several).
	busy int
	// idle is set while the connection waits between requests, so that
	// Read notices, without the lock, the first bytes of the next one.
	idle      atomic.Bool
	closeOnce sync.Once
}

// admit counts raw against the caps and returns it tracked, due at its
// handshake's deadline, when decide lets it in, having closed the
// connection it displaces if any. When decide refuses it, admit resets
// raw and returns nil. At a cap where every connection that could go is
// busy it waits for one to end; it returns nil, having closed raw, when
// done is closed meanwhile.
func (l *connLimiter) admit(raw net.Conn, done <-chan struct{}) *trackedConn {
	addr := peerAddr(raw)
	for {
		l.mu.Lock()
		victim, v := l.makeRoom(addr)
		var c *trackedConn
		if v != refuse && v != waitForRoom {
			c = l.add(raw, addr)
		}
		l.mu.Unlock()
		if victim != nil {
			l.shed.Add(1)
			victim.Conn.Close()
		}
		if c != nil {
			return c
		}
		if v == refuse {
			l.refused.Add(1)
			reset(raw)
			return nil
		}
		select {
		case <-l.freed:
		case <-done:
			raw.Close()
			return nil
		}
	}
}

// reset closes raw with a TCP reset, which a peer's read or write sees
// at once as "connection reset", and which leaves no TIME_WAIT socket
// behind for each of a flood's refused connections. (The kube-apiserver
// does not retry an admission call whose connection was reset: client-go
// retries resets only for GETs.)
func reset(raw net.Conn) {
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	raw.Close()
}

// verdict is what becomes of a new connection at the caps.
type verdict int

const (
	// fits: it is below both caps.
	fits verdict = iota
	// cutOwn: its address's connection due soonest is closed for it.
	cutOwn
	// cutAny: the connection due soonest of all is closed for it.
	cutAny
	// refuse: it is closed at once, before any TLS.
	refuse
	// waitForRoom: every connection that could go for it is deciding.
	waitForRoom
)

func (v verdict) String() string {
	return [...]string{"fits", "cutOwn", "cutAny", "refuse", "waitForRoom"}[v]
}

// arrival is what decide knows of a new connection and its address.
type arrival struct {
	// proven: the address is proven (see connLimiter).
	proven bool
	// held is the address's open connections; atPeerCap, whether they
	// are MaxConnectionsPerPeer; ownCuttable, whether one is not
	// deciding an admission.
	held                   int
	atPeerCap, ownCuttable bool
	// atCap: MaxConnections are open; anyCuttable: one of them is not
	// deciding an admission.
	atCap, anyCuttable bool
	// failing: a handshake from the address failed within the last
	// HandshakeTimeout.
	failing bool
}

// decide is the rule of the caps. An unproven address is refused at its
// own cap, and once it holds unprovenGrace, at the global one or while its
// handshakes fail; anyone else displaces the connection due soonest (its
// address's own at its address's cap), or waits when every candidate is
// deciding. Cutting at the peer cap frees a place under the global cap
// too.
func decide(a arrival) verdict {
	switch {
	case a.atPeerCap && !a.proven:
		return refuse
	case a.atPeerCap && a.ownCuttable:
		return cutOwn
	case a.atPeerCap:
		return waitForRoom
	case !a.proven && a.held >= unprovenGrace && (a.atCap || a.failing):
		return refuse
	case !a.atCap:
		return fits
	case a.anyCuttable:
		return cutAny
	}
	return waitForRoom
}

// makeRoom decides for a new connection from addr and forgets, and
// returns to be closed, the connection it displaces if any; l.mu is held.
func (l *connLimiter) makeRoom(addr netip.Addr) (victim *trackedConn, v verdict) {
	p := l.peers[addr]
	a := arrival{atCap: l.count >= l.max, anyCuttable: l.all.Len() > 0}
	if p != nil {
		a.held, a.atPeerCap, a.ownCuttable = p.count, p.count >= l.perPeer, p.due.Len() > 0
		a.failing = !p.failed.IsZero() && l.now().Sub(p.failed) < l.handshake
	}
	if a.atCap || a.atPeerCap || a.failing {
		a.proven = l.isProven(addr, p)
	}
	switch v = decide(a); v {
	case cutOwn:
		victim = p.due.victim(l.now())
	case cutAny:
		victim = l.all.victim(l.now())
	}
	if victim != nil {
		l.forget(victim)
	}
	return victim, v
}

// isProven reports whether addr, whose open connections are p (nil for
// none), is proven; l.mu is held.
func (l *connLimiter) isProven(addr netip.Addr, p *peerConns) bool {
	if p != nil && p.proved > 0 {
		return true
	}
	_, ok := l.proven[addr]
	return ok
}

// prove marks c as having proved its address; l.mu is held.
func (l *connLimiter) prove(c *trackedConn) {
	if c.counted && !c.proved {
		c.proved = true
		c.peer.proved++
	}
}

// remember keeps addr, whose last proved connection has closed, proven;
// l.mu is held. l.proven holds at most max entries, as many as the
// addresses that can hold a connection at once: when it is full, the
// address whose last proved connection closed longest ago goes. (No
// proof lapses with time, so that a kube-apiserver quiet for hours is
// still proven; one that can prove itself by an admission's body, any
// peer without client authentication, could renew it anyway.)
func (l *connLimiter) remember(addr netip.Addr) {
	if _, ok := l.proven[addr]; !ok && len(l.proven) >= l.max {
		var oldest netip.Addr
		var first time.Time
		for a, at := range l.proven {
			if first.IsZero() || at.Before(first) {
				oldest, first = a, at
			}
		}
		delete(l.proven, oldest)
	}
	l.proven[addr] = l.now()
}

// add counts a new connection; l.mu is held.
func (l *connLimiter) add(raw net.Conn, addr netip.Addr) *trackedConn {
	p := l.peers[addr]
	if p == nil {
		p = &peerConns{addr: addr, due: newCuttable(1)}
		l.peers[addr] = p
	}
	c := &trackedConn{Conn: raw, l: l, peer: p, counted: true, pos: [2]int{-1, -1}}
	c.since = l.now()
	c.due = c.since.Add(l.handshake)
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
	if c.proved {
		if c.peer.proved--; c.peer.proved == 0 {
			l.remember(c.peer.addr)
		}
	}
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
		heap.Push(l.all.of(c), c)
		heap.Push(c.peer.due.of(c), c)
	}
}

func (l *connLimiter) remove(c *trackedConn) {
	if c.pos[0] >= 0 {
		heap.Remove(l.all.of(c), c.pos[0])
		heap.Remove(c.peer.due.of(c), c.pos[1])
	}
}

// setDue makes c, in the same stage, due at due.
func (l *connLimiter) setDue(c *trackedConn, due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.place(c, due, c.since, c.kept)
}

// enter moves c into a new stage of a request, due at due: unless it is
// busy, it is a candidate to cut among the connections in a stage.
func (l *connLimiter) enter(c *trackedConn, due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enterLocked(c, due)
}

func (l *connLimiter) enterLocked(c *trackedConn, due time.Time) {
	l.place(c, due, l.now(), false)
}

// place records c's due time, the start of its stage and whether it is
// kept alive, and files it with the candidates to cut of its kind unless
// it is busy; l.mu is held.
func (l *connLimiter) place(c *trackedConn, due, since time.Time, kept bool) {
	if !c.counted {
		return
	}
	if c.pos[0] >= 0 && c.kept != kept {
		l.remove(c) // filed by kind: it moves to the other heaps
	}
	c.due, c.since, c.kept = due, since, kept
	if c.busy > 0 {
		return
	}
	if c.pos[0] < 0 {
		l.insert(c)
		return
	}
	heap.Fix(l.all.of(c), c.pos[0])
	heap.Fix(c.peer.due.of(c), c.pos[1])
}

// handshaken marks c's handshake done: its first request's headers are
// due next. With client authentication, the handshake proves c's
// address.
func (l *connLimiter) handshaken(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.shaken = true
	if l.authenticated {
		l.prove(c)
	}
	l.enterLocked(c, l.now().Add(l.header))
}

// handshakeFailed records that c's handshake failed, unless c was cut.
func (l *connLimiter) handshakeFailed(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.counted {
		c.peer.failed = l.now()
	}
}

// deciding marks an admission being decided on c, whose body is in: c
// is not cut until the server is done with it (connState then makes it
// idle), and it proves its address.
func (l *connLimiter) deciding(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.counted {
		c.busy++
		l.remove(c)
		l.prove(c)
	}
}

// connState is http.Server.ConnState: a request whose headers are in has
// ReadHeaderTimeout for its body to start (decode then paces it); an
// idle connection is kept alive until the end of its idle time.
func (l *connLimiter) connState(nc net.Conn, state http.ConnState) {
	c := trackedOf(nc)
	if c == nil {
		return
	}
	switch state {
	case http.StateActive:
		c.idle.Store(false)
		l.enter(c, l.now().Add(l.header))
	case http.StateIdle:
		c.idle.Store(true)
		l.mu.Lock()
		c.busy = 0
		now := l.now()
		l.place(c, now.Add(l.idle), now, true)
		l.mu.Unlock()
		l.signal()
	}
}

// Read notices a kept-alive connection's next request: its headers are
// then due within ReadHeaderTimeout, as net/http enforces.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.idle.Load() && c.idle.CompareAndSwap(true, false) {
		c.l.enter(c, c.l.now().Add(c.l.header))
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

// cuttable holds the connections of one scope (the limiter's, or one
// peer's) that may be closed for a new one: those in a stage of a
// request, and those kept alive between requests.
type cuttable struct {
	staged, kept dueHeap
}

func newCuttable(slot int) cuttable {
	return cuttable{staged: dueHeap{slot: slot}, kept: dueHeap{slot: slot, byIdle: true}}
}

// Len is how many connections may be cut.
func (s *cuttable) Len() int { return s.staged.Len() + s.kept.Len() }

// of is the heap that files c, by its kind.
func (s *cuttable) of(c *trackedConn) *dueHeap {
	if c.kept {
		return &s.kept
	}
	return &s.staged
}

// victim is the connection to close for a new one at now (see
// connLimiter), nil when none may be cut: the connection in a stage due
// soonest, unless it entered that stage less than quietFor ago and a
// kept-alive one has been idle for quietFor, which then goes (the one
// idle longest); a kept-alive one when no connection is in a stage.
func (s *cuttable) victim(now time.Time) *trackedConn {
	var staged, kept *trackedConn
	if s.staged.Len() > 0 {
		staged = s.staged.conns[0]
	}
	if s.kept.Len() > 0 {
		kept = s.kept.conns[0]
	}
	spare := kept != nil && now.Sub(kept.since) >= quietFor
	if staged == nil || spare && now.Sub(staged.since) < quietFor {
		return kept
	}
	return staged
}

// dueHeap orders connections in a stage of a request by due time,
// soonest first (with client authentication, connections still in their
// handshake come before all handshaken ones), or, when byIdle is set,
// kept-alive connections by how long they have been idle, longest first.
// slot is the index of trackedConn.pos it maintains.
type dueHeap struct {
	conns  []*trackedConn
	slot   int
	byIdle bool
}

func (h *dueHeap) Len() int { return len(h.conns) }

func (h *dueHeap) Less(i, j int) bool {
	a, b := h.conns[i], h.conns[j]
	if h.byIdle {
		return a.since.Before(b.since)
	}
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
