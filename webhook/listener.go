package webhook

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// tlsListener accepts connections as fast as they arrive, counts each
// against a connLimiter (which makes room at the cap), completes each TLS
// handshake in a goroutine of its own within the limiter's handshake
// deadline, and hands Accept only connections whose handshake is done. A
// peer that connects and never finishes its handshake therefore holds
// neither the http.Server's accept loop nor, past the deadline, a slot.
type tlsListener struct {
	raw    net.Listener
	l      *connLimiter
	config *tls.Config
	// logger reports failed handshakes, connections closed at a cap and
	// new ones reset there, at most one of each a second: a flood makes
	// thousands.
	logger *zap.Logger
	// shedMessage says a connection was closed at a cap for a new one,
	// refuseMessage that a new one was refused, naming the caps' settings.
	shedMessage, refuseMessage string

	ready     chan net.Conn // handshaken connections for Accept
	failed    chan error    // the raw listener's last error
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func newTLSListener(raw net.Listener, l *connLimiter, config *tls.Config, logger *zap.Logger, shedMessage, refuseMessage string) *tlsListener {
	ln := &tlsListener{
		raw:           raw,
		l:             l,
		config:        config,
		logger:        logger,
		shedMessage:   shedMessage,
		refuseMessage: refuseMessage,
		ready:         make(chan net.Conn),
		failed:        make(chan error, 1),
		done:          make(chan struct{}),
	}
	go ln.acceptLoop()
	return ln
}

// Accept returns the next connection whose handshake is done.
func (ln *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-ln.ready:
		return c, nil
	case err := <-ln.failed:
		ln.failed <- err
		return nil, err
	case <-ln.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; handshakes under way end at their deadline, or
// at once when they finish (nothing takes their connection any more).
func (ln *tlsListener) Close() error {
	err := net.ErrClosed
	ln.closeOnce.Do(func() {
		close(ln.done)
		err = ln.raw.Close()
	})
	return err
}

func (ln *tlsListener) Addr() net.Addr { return ln.raw.Addr() }

// acceptLoop accepts until the raw listener fails, backing off on
// temporary errors (out of file descriptors, say) as net/http does.
func (ln *tlsListener) acceptLoop() {
	var backoff time.Duration
	for {
		raw, err := ln.raw.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() && !errors.Is(err, net.ErrClosed) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				ln.logger.Warn("webhook accept failed; retrying", zap.Duration("after", backoff), zap.Error(err))
				select {
				case <-time.After(backoff):
					continue
				case <-ln.done:
					return
				}
			}
			ln.failed <- err
			return
		}
		backoff = 0
		shed, refused := ln.l.shed.Load(), ln.l.refused.Load()
		c := ln.l.admit(raw, ln.done)
		if ln.l.refused.Load() != refused {
			ln.logger.Warn(ln.refuseMessage, zap.Stringer("remote", raw.RemoteAddr()), zap.Int64("refusedSoFar", ln.l.refused.Load()))
		}
		if c == nil {
			continue
		}
		if ln.l.shed.Load() != shed {
			ln.logger.Warn(ln.shedMessage, zap.Stringer("remote", raw.RemoteAddr()), zap.Int64("closedSoFar", ln.l.shed.Load()))
		}
		go ln.handshake(c)
	}
}

// handshake completes c's TLS handshake by its due time and hands c to
// Accept.
func (ln *tlsListener) handshake(c *trackedConn) {
	ln.l.mu.Lock()
	deadline := c.due
	ln.l.mu.Unlock()
	c.SetDeadline(deadline)
	tc := tls.Server(c, ln.config)
	if err := tc.Handshake(); err != nil {
		ln.logger.Warn("TLS handshake failed", zap.Stringer("remote", c.RemoteAddr()), zap.Error(err))
		ln.l.handshakeFailed(c)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	ln.l.handshaken(c)
	select {
	case ln.ready <- tc:
	case <-ln.done:
		c.Close()
	}
}
