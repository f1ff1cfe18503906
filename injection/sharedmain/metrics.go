package sharedmain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/metrics"
)

// MetricsPath is where the metrics endpoint answers.
const MetricsPath = "/metrics"

type metricsRegistryKey struct{}

// WithMetricsRegistry returns a copy of ctx that makes Run register its
// metrics (package metrics) in reg rather than in a registry of its own,
// and serve reg at --metrics-address: a test reads them from reg, and a
// Binding author's own metrics registered in reg are served beside
// bindkit's. reg serves one Run: a second Run with it fails to start. Go
// runtime and process metrics are not added to a registry given this way.
// With it, metrics are kept even when --metrics-address is off.
func WithMetricsRegistry(ctx context.Context, reg *prometheus.Registry) context.Context {
	return context.WithValue(ctx, metricsRegistryKey{}, reg)
}

// newMetrics builds the process's metrics: in the registry of ctx, or in
// a new one (metrics.NewRegistry) unless the endpoint is off, in which
// case it returns nil and nothing is counted.
func newMetrics(ctx context.Context, f Flags) (*metrics.Metrics, *prometheus.Registry, error) {
	reg, given := ctx.Value(metricsRegistryKey{}).(*prometheus.Registry)
	switch {
	case given && reg == nil:
		return nil, nil, errors.New("metrics: WithMetricsRegistry with a nil registry")
	case !given && f.MetricsAddress == MetricsOff:
		return nil, nil, nil
	case !given:
		reg = metrics.NewRegistry()
	}
	m, err := metrics.New(reg)
	if err != nil {
		return nil, nil, err
	}
	return m, reg, nil
}

// withObservers returns ctx carrying what the Impls and the Binding
// reconcilers run in it report to (m, when metrics are on) and the field
// manager of their writes (component).
func withObservers(ctx context.Context, component string, m *metrics.Metrics) context.Context {
	ctx = controller.WithFieldManager(ctx, component)
	if m == nil {
		return ctx
	}
	return controller.WithObserver(ctx, m.Controllers())
}

// watchScraped makes m's scrape-time gauges read impls' leadership and
// the admission controllers' indexes.
func watchScraped(m *metrics.Metrics, impls []*controller.Impl) {
	if m == nil {
		return
	}
	for _, impl := range impls {
		m.WatchLeaders(impl)
		if ix, ok := impl.Reconciler().(metrics.Index); ok {
			m.WatchIndexes(ix)
		}
	}
}

// metricsShutdown bounds the drain of the metrics server.
const metricsShutdown = 5 * time.Second

// serveMetrics serves reg over HTTP at MetricsPath on ln until ctx ends;
// ln is closed on return. A scrape that fails to gather is answered 500
// and logged.
func serveMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry, logger *zap.Logger) error {
	errorLog, _ := zap.NewStdLogAt(logger, zap.WarnLevel)
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            errorLog,
		ErrorHandling:       promhttp.HTTPErrorOnError,
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdown)
	defer cancel()
	err := srv.Shutdown(drain)
	if err != nil {
		srv.Close()
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("metrics: serve on %s: %w", ln.Addr(), serr)
	}
	return err
}
