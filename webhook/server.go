package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Probe paths served next to the admission controllers.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// idleTimeout is how long a kept-alive connection may wait for its next
// request: longer than the kube-apiserver's own idle connections wait (90
// s, net/http's default), so that the caller, not the server, closes an
// idle connection, and never one the caller is starting to write on.
const idleTimeout = 2 * time.Minute

// maxHeaderBytes bounds a request's headers (net/http answers 431 beyond
// it, and allows 4 KiB more): the kube-apiserver sends well under 1 KiB,
// a bearer token a few KiB more, and at net/http's default of 1 MiB a
// thousand connections trickling headers would hold a GiB.
const maxHeaderBytes = 16 << 10

// maxDrain bounds Shutdown: the kube-apiserver gives a webhook call at most
// 30 seconds, so no admission in flight can legitimately take longer.
const maxDrain = 30 * time.Second

// Server is the HTTPS admission webhook. Create it with New; Run or Serve it
// once.
type Server struct {
	opts      Options
	logger    *zap.Logger
	routes    map[string]*route
	certs     *certSource
	clientCAs *clientCAs // nil unless Options.ClientCAFile is set
	budget    *memoryBudget
	inFlight  atomic.Int64
	draining  atomic.Bool
	// conns is the limiter of the connections Serve holds, for tests.
	conns atomic.Pointer[connLimiter]
	// answers pools the buffers answers are encoded into (*[]byte).
	answers sync.Pool
}

// New returns a Server that routes each controller by its Path and serves
// the certificate in the Secret opts.SecretName found through secrets. It
// fails on invalid options, a missing SecretGetter, a nil controller, a path
// not starting with "/", a path used twice or a probe path, and on a
// ClientCAFile it cannot read. It starts no goroutine and opens no port.
func New(opts Options, secrets SecretGetter, controllers ...Admitter) (*Server, error) {
	if secrets == nil {
		return nil, errors.New("webhook: no SecretGetter for the serving certificate")
	}
	s, err := newServer(opts, controllers)
	if err != nil {
		return nil, err
	}
	s.certs = &certSource{
		secrets: secrets,
		name:    s.opts.SecretName,
		certKey: s.opts.Keys.ServerCert,
		keyKey:  s.opts.Keys.ServerKey,
		now:     time.Now,
		logger:  s.opts.Logger,
	}
	if s.opts.ClientCAFile != "" {
		if s.clientCAs, err = loadClientCAs(s.opts.ClientCAFile, s.opts.Logger); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewHandler returns a Server without a certificate, for a process whose
// HTTPS server is another's (a controller-runtime Manager's webhook
// server, say), which owns the port, TLS, its certificates and client
// authentication. Its ServeHTTP routes and bounds admissions as New's
// does: request bodies, admissions in flight and their memory, object
// limits, a controller's panic, the wait for a controller's informers;
// its /readyz reports everything but a certificate. Mount ServeHTTP at
// each controller's Path (or at the probe paths) of the other server.
//
// The settings of the listener (Address, Port, MaxConnections,
// TLSMinVersion, EnableHTTP2, GracePeriod, SecretName, Keys) are the other
// server's and unused; ClientCAFile, which this Server could not enforce,
// is refused. Serve and Run return an error, and TLSConfig returns nil.
// It fails as New does on invalid options and controllers.
func NewHandler(opts Options, controllers ...Admitter) (*Server, error) {
	if opts.ClientCAFile != "" {
		return nil, fmt.Errorf("webhook: %s %q: a Server without a certificate cannot require client certificates; set them on the server that serves it", opts.SettingName("ClientCAFile"), opts.ClientCAFile)
	}
	return newServer(opts, controllers)
}

// newServer returns a Server routing controllers, without certificates.
func newServer(opts Options, controllers []Admitter) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:   opts,
		logger: opts.Logger,
		routes: make(map[string]*route, len(controllers)),
		budget: &memoryBudget{limit: opts.MaxInFlightMemory, setting: opts.SettingName("MaxInFlightMemory")},
	}
	s.answers.New = func() any {
		b := make([]byte, 0, firstAnswerBuffer)
		return &b
	}
	for i, c := range controllers {
		if c == nil {
			return nil, fmt.Errorf("webhook: admission controller %d is nil", i)
		}
		path := c.Path()
		switch {
		case !strings.HasPrefix(path, "/"):
			return nil, fmt.Errorf("webhook: admission controller %T: path %q does not start with /", c, path)
		case path == HealthzPath || path == ReadyzPath:
			return nil, fmt.Errorf("webhook: admission controller %T: path %s is reserved for probes", c, path)
		case s.routes[path] != nil:
			return nil, fmt.Errorf("webhook: admission controllers %T and %T both serve path %s", s.routes[path].ctrl, c, path)
		}
		rt := &route{ctrl: c}
		rt.syncer, _ = c.(Syncer)
		if opts.Observer != nil {
			rt.observer = opts.Observer.ObserveRoute(path)
		}
		s.routes[path] = rt
	}
	return s, nil
}

// ServeHTTP routes admission paths and the probes. It is the handler Serve
// runs behind TLS; tests and benchmarks may call it directly.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		// Shutting down: the connection closes after this answer, so the
		// caller's next request opens a new one (to another replica once
		// this one has left the Service's endpoints).
		w.Header().Set("Connection", "close")
	}
	switch path := r.URL.Path; path {
	case HealthzPath, ReadyzPath:
		s.serveProbe(w, r)
	default:
		rt := s.routes[path]
		if rt == nil {
			http.Error(w, fmt.Sprintf("no admission controller at path %s", path), http.StatusNotFound)
			return
		}
		s.serveAdmission(w, r, rt)
	}
}

// ProbeHandler serves /healthz and /readyz alone, answering as ServeHTTP
// does, for a plain HTTP port beside the webhook: a kubelet's HTTPS probe
// presents no client certificate, so with ClientCAFile set it cannot reach
// the webhook's own port.
func (s *Server) ProbeHandler() http.Handler {
	return http.HandlerFunc(s.serveProbe)
}

func (s *Server) serveProbe(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case HealthzPath:
		w.Write([]byte("ok"))
	case ReadyzPath:
		if err := s.ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	default:
		http.NotFound(w, r)
	}
}

// ready reports why the server should not receive traffic, or nil.
func (s *Server) ready() error {
	if s.draining.Load() {
		return errors.New("shutting down")
	}
	for path, rt := range s.routes {
		if !rt.hasSynced() {
			return fmt.Errorf("admission controller %s: informers have not synced", path)
		}
		if c, ok := rt.ctrl.(Checker); ok {
			if err := c.Check(); err != nil {
				return fmt.Errorf("admission controller %s: %w", path, err)
			}
		}
	}
	if s.certs == nil {
		return nil // NewHandler's: the serving server checks its own
	}
	if _, err := s.certs.get(); err != nil {
		return err
	}
	return nil
}

// TLSConfig returns the TLS configuration Serve uses: the minimum version
// from Options, the certificate read from the Secret on each handshake and,
// with ClientCAFile, a client certificate required and verified against it.
// A Server from NewHandler has none: nil.
func (s *Server) TLSConfig() *tls.Config {
	if s.certs == nil {
		return nil
	}
	cfg := &tls.Config{
		MinVersion:     s.opts.TLSMinVersion,
		GetCertificate: s.certs.getCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if s.opts.EnableHTTP2 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if s.clientCAs != nil {
		// Any certificate is requested and VerifyConnection checks it, on
		// every handshake, against the CA file as it is now. No CA names
		// are sent, so a client presents its certificate whoever signed it
		// and learns of a mismatch from the handshake's failure.
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyConnection = s.clientCAs.verifyConnection
	}
	return cfg
}

// leavePaths asks every Admitter to leave the kube-apiserver's path
// (PathLeaver), all at once, and returns a channel closed when all have:
// never when one is no PathLeaver or says it cannot leave, or when there
// is none.
func (s *Server) leavePaths(ctx context.Context) <-chan struct{} {
	left := make(chan struct{})
	leavers := make([]PathLeaver, 0, len(s.routes))
	for _, rt := range s.routes {
		l, ok := rt.ctrl.(PathLeaver)
		if !ok {
			return left
		}
		leavers = append(leavers, l)
	}
	if len(leavers) == 0 {
		return left
	}
	go func() {
		var wg sync.WaitGroup
		var stayed atomic.Bool
		for _, l := range leavers {
			wg.Go(func() {
				if !l.LeavePath(ctx) {
					stayed.Store(true)
				}
			})
		}
		wg.Wait()
		if !stayed.Load() {
			close(left)
		}
	}()
	return left
}

// Run listens on Options.Address and Options.Port and calls Serve.
func (s *Server) Run(ctx context.Context) error {
	addr := net.JoinHostPort(s.opts.Address, strconv.Itoa(s.opts.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("webhook: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves HTTPS on ln until ctx ends, then shuts down: /readyz fails at
// once, the server keeps answering for Options.GracePeriod so callers notice
// (closing each connection after its next answer, never an idle one under a
// caller's write), then it stops accepting, waits for requests in flight
// (at most 30 seconds) and returns nil. ln is closed on return. An error means serving failed,
// or that the Server, from NewHandler, has no certificate to serve with.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.certs == nil {
		ln.Close()
		return errors.New("webhook: this Server has no certificate (NewHandler): mount its ServeHTTP on the server that owns the port")
	}
	srv, ln := s.httpServer(ctx, ln)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("webhook: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	if err := s.graceUntilOutOfPath(ctx, served); err != nil {
		return fmt.Errorf("webhook: serve on %s: %w", ln.Addr(), err)
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxDrain)
	defer cancel()
	err := srv.Shutdown(drainCtx)
	if err != nil {
		srv.Close()
		err = fmt.Errorf("webhook: drain: %w", err)
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("webhook: serve on %s: %w", ln.Addr(), serr)
	}
	return err
}

// httpServer returns the http.Server Serve runs and the listener it
// serves: ln behind the connection caps and TLS (tlsListener), with the
// timeouts and limits of s.opts.
func (s *Server) httpServer(ctx context.Context, ln net.Listener) (*http.Server, net.Listener) {
	// Handshake failures land in the server's error log; they are worth a
	// warning, not a crash. NewStdLogAt fails only for an invalid level.
	errorLog, _ := zap.NewStdLogAt(s.logger.Named("http"), zapcore.WarnLevel)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(s.opts.EnableHTTP2)
	limiter := newConnLimiter(s.opts, idleTimeout)
	s.conns.Store(limiter)
	tlsConfig := s.TLSConfig()
	// Handshakes are the listener's (see tlsListener): under a flood,
	// thousands fail, so their warnings are sampled.
	sampled := s.logger.Named("tls").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	caps := fmt.Sprintf("(%s, %s)", s.opts.SettingName("MaxConnections"), s.opts.SettingName("MaxConnectionsPerPeer"))
	ln = newTLSListener(ln, limiter, tlsConfig, sampled,
		"at a connection cap "+caps+": closed a connection for a new one (one stalled in a request, or kept alive and idle)",
		fmt.Sprintf("connection caps %s: reset a new connection before TLS from an address that has not proven itself (sent no admission, or with client authentication completed no handshake) and holds connections (at its cap, or %d or more at the global cap or while its handshakes fail)", caps, unprovenGrace))
	return &http.Server{
		Handler:           s,
		TLSConfig:         tlsConfig,
		Protocols:         &protocols,
		ReadHeaderTimeout: limiter.header,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      2 * s.opts.ReadTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         limiter.connState,
		ConnContext:       connContext,
		ErrorLog:          errorLog,
		BaseContext: func(net.Listener) context.Context {
			// Requests outlive ctx during the grace period and the drain.
			return context.WithoutCancel(ctx)
		},
	}, ln
}

// graceUntilOutOfPath keeps serving, once ctx is done, for the grace
// period or until every path has left the kube-apiserver's path
// (leavePaths), whichever comes first; it returns the server's error if
// it stopped serving meanwhile.
//
// Each connection closes after its next answer (ServeHTTP), never while
// idle: a caller may be writing a request on an idle connection at any
// moment, and closing it under that write refuses the request (the
// kube-apiserver does not resend an admission review, and with
// failurePolicy Fail the create fails). Connections still idle at the end
// of the grace period have carried nothing through it.
func (s *Server) graceUntilOutOfPath(ctx context.Context, served <-chan error) error {
	s.draining.Store(true)
	s.logger.Info("webhook shutting down", zap.Duration("gracePeriod", s.opts.GracePeriod))
	if s.opts.GracePeriod <= 0 {
		return nil
	}
	grace := time.NewTimer(s.opts.GracePeriod)
	defer grace.Stop()
	leaving, stopLeaving := context.WithTimeout(context.WithoutCancel(ctx), s.opts.GracePeriod)
	defer stopLeaving()
	left := s.leavePaths(leaving)
	select {
	case err := <-served:
		return err
	case <-grace.C:
	case <-left:
		s.logger.Info("webhook out of the kube-apiserver's path: draining without the rest of the grace period")
	}
	return nil
}
