package sharedmain

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

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

// Bounds on what a caller of the metrics endpoint, authenticated or not,
// makes the process hold.
const (
	// maxMetricsConnections caps the connections open at once; more wait
	// in the kernel's backlog until one closes.
	maxMetricsConnections = 64
	// metricsReadHeaderTimeout bounds a connection's TLS handshake and
	// its request's headers.
	metricsReadHeaderTimeout = 10 * time.Second
	// metricsIdleTimeout closes a kept-alive connection no scrape used for
	// this long (Prometheus scrapes every 15 to 60 s).
	metricsIdleTimeout = 2 * time.Minute
	// maxMetricsHeaderBytes bounds a request's headers, the bearer token
	// among them.
	maxMetricsHeaderBytes = 64 << 10
)

// metricsServer is the process's metrics endpoint, built before anything
// listens: HTTPS behind metricsAuth with the certificate of
// metricsCertificate, or plain HTTP under Flags.MetricsInsecure.
type metricsServer struct {
	handler http.Handler
	tls     *tls.Config // nil serves plain HTTP
	logger  *zap.Logger
}

// newMetricsServer builds the endpoint serving reg as f says; kube sends
// the reviews of its callers' tokens. An error names the flag at fault.
func newMetricsServer(f Flags, reg *prometheus.Registry, kube kubernetes.Interface, logger *zap.Logger) (*metricsServer, error) {
	errorLog, _ := zap.NewStdLogAt(logger, zap.WarnLevel)
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            errorLog,
		ErrorHandling:       promhttp.HTTPErrorOnError,
		MaxRequestsInFlight: 4,
		Timeout:             30 * time.Second,
	})
	m := &metricsServer{logger: logger}
	if !f.MetricsInsecure {
		auth, err := newMetricsAuth(metricsAuthOptions{Client: kube, Logger: logger})
		if err != nil {
			return nil, err
		}
		h = auth.wrap(h)
		cert, err := newMetricsCertificate(f.MetricsCertDir, time.Now, logger)
		if err != nil {
			return nil, err
		}
		m.tls = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: cert.get,
			// HTTP/1.1 only, as the webhook: a scraper needs no streams,
			// and HTTP/2's would be one more thing a caller could make the
			// process hold before it has shown a token.
			NextProtos: []string{"http/1.1"},
		}
	}
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, h)
	m.handler = mux
	return m, nil
}

// serve serves the endpoint on ln until ctx ends; ln is closed on return.
// A scrape that fails to gather is answered 500 and logged.
func (m *metricsServer) serve(ctx context.Context, ln net.Listener) error {
	errorLog, _ := zap.NewStdLogAt(m.logger, zap.WarnLevel)
	srv := &http.Server{
		Handler:           m.handler,
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    maxMetricsHeaderBytes,
		ErrorLog:          errorLog,
		// An empty map turns HTTP/2 off.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	ln = newLimitListener(ln, maxMetricsConnections)
	if m.tls != nil {
		ln = tls.NewListener(ln, m.tls)
	}
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

// limitListener holds at most a fixed number of accepted connections
// open: Accept waits for one to close.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, at its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// logMetricsServing says where and how the metrics are served; plain
// HTTP, which anyone who reaches the port reads, at warn.
func (p *process) logMetricsServing(addr net.Addr) {
	fields := []zap.Field{zap.String("address", addr.String()), zap.String("path", MetricsPath)}
	if p.flags.MetricsInsecure {
		p.logger.Warn("serving metrics over plain HTTP to anyone who reaches the address, unauthenticated (--metrics-secure=false)", fields...)
		return
	}
	cert := "self-signed, generated at start"
	if p.flags.MetricsCertDir != "" {
		cert = p.flags.MetricsCertDir
	}
	p.logger.Info("serving metrics over HTTPS to callers authorized to get "+MetricsPath+" (TokenReview, SubjectAccessReview)",
		append(fields, zap.String("certificate", cert))...)
}
