package webhook

import (
	stdcmp "cmp"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeConn is a connection from addr that records its Close.
type fakeConn struct {
	net.Conn // nil: the limiter calls only RemoteAddr and Close
	addr     *net.TCPAddr
	mu       sync.Mutex
	closed   bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// many is n connections from peer at stage, named peer#i.
func many(n int, peer, stage string) []conn {
	var out []conn
	for i := range n {
		out = append(out, conn{name: fmt.Sprintf("%s#%d", peer, i), peer: peer, stage: stage})
	}
	return out
}

// conn is a connection TestConnLimiterShedsTheConnectionDueSoonest opens.
type conn struct {
	name, peer string
	// stage: "handshake", "headers" (handshaken), "body" (due in
	// dueIn), "deciding" or "idle" (after an admission), "failed" (its
	// handshake failed; closed); "wait" opens nothing and moves the
	// clock by dueIn.
	stage string
	dueIn time.Duration
}

// TestConnLimiterShedsTheConnectionDueSoonest drives a connLimiter
// through the stages of its connections on a fake clock and checks which
// one a new connection at a cap closes.
func TestConnLimiterShedsTheConnectionDueSoonest(t *testing.T) {
	for _, tc := range []struct {
		name          string
		max, perPeer  int
		authenticated bool
		open          []conn
		// proven are addresses proven before (their proving connection
		// since closed).
		proven  []string
		newPeer string
		// shed is the connection closed for the new one; "" means none.
		shed string
		// refused: the new connection is itself closed.
		refused bool
	}{{
		name:    "a fresh connection goes before a kept-alive one in use",
		max:     2,
		open:    []conn{{name: "apiserver", peer: "10.0.0.1", stage: "idle"}, {name: "silent", peer: "10.0.0.2", stage: "handshake"}},
		newPeer: "10.0.0.3", shed: "silent",
	}, {
		name: "a spare kept-alive connection goes before a connection in its first moments",
		max:  2,
		open: []conn{{name: "spare", peer: "10.0.0.1", stage: "idle"}, {stage: "wait", dueIn: quietFor},
			{name: "new", peer: "10.0.0.2", stage: "handshake"}},
		newPeer: "10.0.0.3", shed: "spare",
	}, {
		name: "a stalled connection goes before a spare kept-alive one",
		max:  2,
		open: []conn{{name: "spare", peer: "10.0.0.1", stage: "idle"}, {name: "stalled", peer: "10.0.0.2", stage: "headers"},
			{stage: "wait", dueIn: quietFor}},
		newPeer: "10.0.0.3", shed: "stalled",
	}, {
		name: "of spare kept-alive connections, the one idle longest goes",
		max:  3,
		open: []conn{{name: "older", peer: "10.0.0.1", stage: "idle"}, {name: "newer", peer: "10.0.0.1", stage: "idle"},
			{stage: "wait", dueIn: quietFor}, {name: "new", peer: "10.0.0.1", stage: "handshake"}},
		newPeer: "10.0.0.1", shed: "older",
	}, {
		// The kube-apiserver after caBundle changes: the connections of
		// the clients it dropped sit idle beside the new client's.
		name: "at its peer cap, a proven peer's spare goes before its own new connections",
		max:  10, perPeer: 3,
		open: []conn{{name: "dropped client's", peer: "10.0.0.1", stage: "idle"}, {stage: "wait", dueIn: 2 * quietFor},
			{name: "handshaking", peer: "10.0.0.1", stage: "handshake"}, {name: "sending", peer: "10.0.0.1", stage: "body", dueIn: time.Millisecond}},
		newPeer: "10.0.0.1", shed: "dropped client's",
	}, {
		name:          "with client authentication, a spare authenticated connection goes before a handshake in its first moments",
		max:           2,
		authenticated: true,
		open: []conn{{name: "spare", peer: "10.0.0.1", stage: "idle"}, {stage: "wait", dueIn: quietFor},
			{name: "handshake", peer: "10.0.0.2", stage: "handshake"}},
		newPeer: "10.0.0.1", shed: "spare",
	}, {
		name:    "a stalled body goes before a new handshake",
		max:     2,
		open:    []conn{{name: "new", peer: "10.0.0.1", stage: "handshake"}, {name: "stalled", peer: "10.0.0.2", stage: "body", dueIn: time.Second}},
		newPeer: "10.0.0.3", shed: "stalled",
	}, {
		name:    "the older of two silent connections goes first",
		max:     2,
		open:    []conn{{name: "older", peer: "10.0.0.2", stage: "headers"}, {name: "newer", peer: "10.0.0.2", stage: "handshake"}},
		proven:  []string{"10.0.0.2"},
		newPeer: "10.0.0.2", shed: "older",
	}, {
		name:    "an unproven address holding unprovenGrace connections is refused at the cap",
		max:     unprovenGrace + 1,
		open:    append(many(unprovenGrace, "10.0.0.2", "headers"), conn{name: "other", peer: "10.0.0.3", stage: "handshake"}),
		newPeer: "10.0.0.2", refused: true,
	}, {
		name:    "an unproven address holding fewer displaces at the cap",
		max:     unprovenGrace,
		open:    append(many(unprovenGrace-1, "10.0.0.2", "headers"), conn{name: "other", peer: "10.0.0.3", stage: "handshake"}),
		newPeer: "10.0.0.2", shed: "10.0.0.2#0",
	}, {
		name:    "an address proven by an admission on a connection still open displaces",
		max:     2,
		open:    []conn{{name: "deciding", peer: "10.0.0.1", stage: "deciding"}, {name: "silent", peer: "10.0.0.2", stage: "handshake"}},
		newPeer: "10.0.0.1", shed: "silent",
	}, {
		name:    "an address whose admission is done displaces",
		max:     2,
		open:    []conn{{name: "idle", peer: "10.0.0.1", stage: "idle"}, {name: "silent", peer: "10.0.0.2", stage: "handshake"}},
		newPeer: "10.0.0.1", shed: "silent",
	}, {
		name:    "a handshake alone proves nothing without client authentication",
		max:     unprovenGrace + 1,
		open:    append(many(unprovenGrace, "10.0.0.1", "headers"), conn{name: "silent", peer: "10.0.0.2", stage: "handshake"}),
		newPeer: "10.0.0.1", refused: true,
	}, {
		name:          "with client authentication, a handshake proves its address",
		max:           2,
		authenticated: true,
		open:          []conn{{name: "authenticated", peer: "10.0.0.1", stage: "headers"}, {name: "handshake", peer: "10.0.0.1", stage: "handshake"}},
		newPeer:       "10.0.0.1", shed: "handshake",
	}, {
		name:          "with client authentication, a proven address still never displaces an authenticated connection for a handshake",
		max:           2,
		authenticated: true,
		open:          []conn{{name: "authenticated", peer: "10.0.0.1", stage: "headers"}, {name: "idle", peer: "10.0.0.2", stage: "idle"}},
		newPeer:       "10.0.0.1", shed: "authenticated",
	}, {
		name:    "a body that keeps pace outlasts headers that do not come",
		max:     2,
		open:    []conn{{name: "headers", peer: "10.0.0.2", stage: "headers"}, {name: "body", peer: "10.0.0.1", stage: "body", dueIn: 20 * time.Second}},
		newPeer: "10.0.0.3", shed: "headers",
	}, {
		name:    "a connection deciding is never cut",
		max:     2,
		open:    []conn{{name: "deciding", peer: "10.0.0.1", stage: "deciding"}, {name: "idle", peer: "10.0.0.1", stage: "idle"}},
		newPeer: "10.0.0.2", shed: "idle",
	}, {
		name:          "with client authentication, handshakes go before authenticated connections",
		max:           2,
		authenticated: true,
		open:          []conn{{name: "authenticated", peer: "10.0.0.1", stage: "headers"}, {name: "handshake", peer: "10.0.0.2", stage: "handshake", dueIn: time.Hour}},
		newPeer:       "10.0.0.3", shed: "handshake",
	}, {
		name: "at its peer cap a proven peer cuts its own connection, not another's due sooner",
		max:  10, perPeer: 2,
		open:    []conn{{name: "other", peer: "10.0.0.1", stage: "body", dueIn: time.Millisecond}, {name: "own1", peer: "10.0.0.2", stage: "idle"}, {name: "own2", peer: "10.0.0.2", stage: "headers"}},
		newPeer: "10.0.0.2", shed: "own2",
	}, {
		name: "at its peer cap an unproven peer is refused and its connections kept",
		max:  10, perPeer: 2,
		open:    []conn{{name: "own1", peer: "10.0.0.2", stage: "handshake"}, {name: "own2", peer: "10.0.0.2", stage: "headers"}},
		newPeer: "10.0.0.2", refused: true,
	}, {
		name: "a proof does not lapse with time",
		max:  unprovenGrace + 1,
		open: append(many(unprovenGrace, "10.0.0.2", "headers"),
			conn{name: "later", peer: "10.0.0.4", stage: "wait", dueIn: 24 * time.Hour}, conn{name: "other", peer: "10.0.0.3", stage: "handshake"}),
		proven:  []string{"10.0.0.2"},
		newPeer: "10.0.0.2", shed: "10.0.0.2#0",
	}, {
		name:    "below the caps, an unproven address holding unprovenGrace whose handshake just failed is refused",
		max:     unprovenGrace + 10,
		open:    append(many(unprovenGrace, "10.0.0.2", "headers"), conn{name: "failed", peer: "10.0.0.2", stage: "failed"}),
		newPeer: "10.0.0.2", refused: true,
	}, {
		name: "a failed handshake counts for HandshakeTimeout",
		max:  unprovenGrace + 10,
		open: append(many(unprovenGrace, "10.0.0.2", "headers"), conn{name: "failed", peer: "10.0.0.2", stage: "failed"},
			conn{name: "later", stage: "wait", dueIn: DefaultHandshakeTimeout}),
		newPeer: "10.0.0.2",
	}, {
		name:    "a failed handshake does not count against a proven address",
		max:     unprovenGrace + 10,
		open:    append(many(unprovenGrace, "10.0.0.2", "idle"), conn{name: "failed", peer: "10.0.0.2", stage: "failed"}),
		newPeer: "10.0.0.2",
	}, {
		name: "below the caps nothing is cut",
		max:  3, perPeer: 2,
		open:    []conn{{name: "a", peer: "10.0.0.2", stage: "handshake"}, {name: "b", peer: "10.0.0.1", stage: "idle"}},
		newPeer: "10.0.0.1",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			o := DefaultOptions()
			o.MaxConnections, o.MaxConnectionsPerPeer = tc.max, stdcmp.Or(tc.perPeer, tc.max)
			if tc.authenticated {
				o.ClientCAFile = "ca.pem"
			}
			l := newConnLimiter(o, idleTimeout)
			l.now = func() time.Time { return now }
			for _, a := range tc.proven {
				l.remember(netip.MustParseAddr(a))
			}
			raws := map[string]*fakeConn{}
			for _, oc := range tc.open {
				if oc.stage == "wait" {
					now = now.Add(oc.dueIn)
					continue
				}
				raw := &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(oc.peer), Port: 1}}
				raws[oc.name] = raw
				c := l.admit(raw, nil)
				if c == nil {
					t.Fatalf("%s refused", oc.name)
				}
				switch oc.stage {
				case "headers":
					l.handshaken(c)
				case "body":
					l.handshaken(c)
					l.connState(c, http.StateActive)
					l.setDue(c, now.Add(oc.dueIn))
				case "deciding":
					l.handshaken(c)
					l.connState(c, http.StateActive)
					l.deciding(c)
				case "idle":
					l.handshaken(c)
					l.connState(c, http.StateActive)
					l.deciding(c)
					l.connState(c, http.StateIdle)
				case "handshake":
					if oc.dueIn != 0 {
						l.setDue(c, now.Add(oc.dueIn))
					}
				case "failed":
					l.handshakeFailed(c)
					c.Close()
					delete(raws, oc.name)
				}
				now = now.Add(time.Millisecond)
			}
			fresh := &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(tc.newPeer), Port: 2}}
			got := l.admit(fresh, nil)
			if refused := got == nil || fresh.isClosed(); refused != tc.refused {
				t.Fatalf("new connection refused: %v, want %v", refused, tc.refused)
			}
			if n := l.refused.Load(); (n == 1) != tc.refused || n > 1 {
				t.Errorf("refused counter %d, want 1 if refused (%v)", n, tc.refused)
			}
			var shed []string
			for name, raw := range raws {
				if raw.isClosed() {
					shed = append(shed, name)
				}
			}
			want := []string{}
			if tc.shed != "" {
				want = []string{tc.shed}
			}
			if diff := cmp.Diff(want, append([]string{}, shed...)); diff != "" {
				t.Errorf("connections closed for the new one (-want +got):\n%s", diff)
			}
			if n := int(l.shed.Load()); n != len(want) {
				t.Errorf("shed counter %d, want %d", n, len(want))
			}
		})
	}
}

// TestConnLimiterWaitsWhenEveryConnectionDecides checks that at a cap,
// the global one or a peer's, with every connection deciding, admit waits
// for one to end rather than cutting it, and gives up when told.
func TestConnLimiterWaitsWhenEveryConnectionDecides(t *testing.T) {
	for _, tc := range []struct {
		name         string
		max, perPeer int
		newPeer      string
	}{
		{"global cap", 1, 1, "10.0.0.2"},
		{"peer cap", 10, 1, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.MaxConnections, o.MaxConnectionsPerPeer = tc.max, tc.perPeer
			l := newConnLimiter(o, idleTimeout)
			busy := l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.1")}}, nil)
			l.handshaken(busy)
			l.deciding(busy)
			admitted := make(chan *trackedConn, 1)
			go func() { admitted <- l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(tc.newPeer)}}, nil) }()
			select {
			case <-admitted:
				t.Fatal("a connection was admitted while the only one at the cap was deciding")
			case <-time.After(100 * time.Millisecond):
			}
			busy.Close()
			var waited *trackedConn
			select {
			case waited = <-admitted:
				if waited == nil {
					t.Fatal("the waiting connection was refused")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiting connection was not admitted when the deciding one ended")
			}

			// Once the listener closes, a connection waiting is closed.
			l.deciding(waited)
			done := make(chan struct{})
			raw := &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(tc.newPeer)}}
			go func() { admitted <- l.admit(raw, done) }()
			close(done)
			if c := <-admitted; c != nil || !raw.isClosed() {
				t.Error("a connection waiting when the listener closed was not closed")
			}
		})
	}
}

// TestDecide is the rule of the caps on its own.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    arrival
		want verdict
	}{
		{"below the caps", arrival{held: 3, anyCuttable: true, ownCuttable: true}, fits},
		{"below the caps, unproven", arrival{held: 3}, fits},
		{"unproven at its own cap", arrival{held: 256, atPeerCap: true, ownCuttable: true, anyCuttable: true}, refuse},
		{"unproven at both caps", arrival{held: 256, atPeerCap: true, atCap: true, ownCuttable: true, anyCuttable: true}, refuse},
		{"proven at its own cap", arrival{proven: true, held: 256, atPeerCap: true, ownCuttable: true, anyCuttable: true}, cutOwn},
		{"proven at both caps cuts its own", arrival{proven: true, held: 256, atPeerCap: true, atCap: true, ownCuttable: true, anyCuttable: true}, cutOwn},
		{"proven at its own cap, all its own deciding", arrival{proven: true, held: 256, atPeerCap: true, anyCuttable: true}, waitForRoom},
		{"proven at the cap", arrival{proven: true, held: 5, atCap: true, anyCuttable: true}, cutAny},
		{"proven at the cap, all deciding", arrival{proven: true, held: 5, atCap: true}, waitForRoom},
		{"unproven holding one at the cap", arrival{held: 1, atCap: true, anyCuttable: true, ownCuttable: true}, cutAny},
		{"unproven holding unprovenGrace at the cap", arrival{held: unprovenGrace, atCap: true, anyCuttable: true, ownCuttable: true}, refuse},
		{"unproven holding none at the cap", arrival{atCap: true, anyCuttable: true}, cutAny},
		{"unproven holding none at the cap, all deciding", arrival{atCap: true}, waitForRoom},
		{"unproven holding unprovenGrace below the cap, its handshakes failing", arrival{held: unprovenGrace, failing: true, anyCuttable: true}, refuse},
		{"unproven holding fewer below the cap, its handshakes failing", arrival{held: unprovenGrace - 1, failing: true, anyCuttable: true}, fits},
		{"proven below the cap, its handshakes failing", arrival{proven: true, held: unprovenGrace, failing: true, anyCuttable: true}, fits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want.String(), decide(tc.a).String()); diff != "" {
				t.Errorf("decide(%+v) (-want +got):\n%s", tc.a, diff)
			}
		})
	}
}

// TestProvenAddressesAreBounded checks that the addresses remembered as
// proven are at most MaxConnections, the one whose proved connection
// closed longest ago going first, and that an address proven by a
// connection still open is proven whatever the set holds.
func TestProvenAddressesAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	o := DefaultOptions()
	o.MaxConnections, o.MaxConnectionsPerPeer = 3, 3
	l := newConnLimiter(o, idleTimeout)
	l.now = func() time.Time { return now }
	prove := func(addr string) *trackedConn {
		c := l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(addr)}}, nil)
		l.handshaken(c)
		l.deciding(c)
		l.connState(c, http.StateIdle)
		now = now.Add(time.Minute)
		return c
	}
	remembered := func() []string {
		var out []string
		for a := range l.proven {
			out = append(out, a.String())
		}
		slices.Sort(out)
		return out
	}
	open := prove("10.0.0.9")
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"} {
		prove(a).Close()
	}
	if diff := cmp.Diff([]string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}, remembered()); diff != "" {
		t.Errorf("remembered with the set full (-want +got):\n%s", diff)
	}
	nine := netip.MustParseAddr("10.0.0.9")
	if !l.isProven(nine, l.peers[nine]) {
		t.Error("an address with a proved connection open is not proven")
	}
	open.Close()
	if diff := cmp.Diff([]string{"10.0.0.3", "10.0.0.4", "10.0.0.9"}, remembered()); diff != "" {
		t.Errorf("remembered once the open one closed (-want +got):\n%s", diff)
	}
}
