package sharedmain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/bindkit/bindkit/webhook"
)

// probeShutdownTimeout bounds the drain of the probe server: its requests
// are tiny, so anything longer is a stuck client.
const probeShutdownTimeout = 5 * time.Second

// probes answers /healthz while the process runs and /readyz once its
// informers have synced, until shutdown begins. It stands in for the
// webhook server's probes in a process without a webhook.
type probes struct {
	ready    atomic.Bool
	draining atomic.Bool
}

func (p *probes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case webhook.HealthzPath:
		w.Write([]byte("ok"))
	case webhook.ReadyzPath:
		switch {
		case p.draining.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case !p.ready.Load():
			http.Error(w, "informers have not synced", http.StatusServiceUnavailable)
		default:
			w.Write([]byte("ok"))
		}
	default:
		http.NotFound(w, r)
	}
}

// serve serves the probes on ln until ctx ends, then shuts down and
// returns; ln is closed on return.
func (p *probes) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("probes: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	p.draining.Store(true)
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(drainCtx)
	if err != nil {
		srv.Close()
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("probes: serve on %s: %w", ln.Addr(), serr)
	}
	return err
}
