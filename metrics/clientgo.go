package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/bindkit/bindkit/internal/processwide"
)

// client-go reports its requests through hooks it accepts once per
// process (tools/metrics.Register). They are installed the first time
// AttachClientGo is called, and forward to the Metrics attached last.
var (
	clientGoOnce sync.Once
	clientGoSlot processwide.Slot[Metrics]
)

// AttachClientGo makes client-go's request latency, request results and
// rate-limiter waits count in m until detach is called. client-go accepts
// its metric hooks only once per process, so the first call installs
// hooks that forward to whichever Metrics was attached last and is still
// attached; a second process run in the same test binary (one
// injection/sharedmain.Run after another, or two at once) takes them over
// while it runs, and the first gets them back when it detaches. Requests
// made while none is attached are not counted.
func (m *Metrics) AttachClientGo() (detach func()) {
	clientGoOnce.Do(func() {
		hooks := clientGoHooks{}
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     hooks,
			RateLimiterLatency: rateLimiterHook{},
			RequestResult:      hooks,
		})
	})
	return clientGoSlot.Attach(m)
}

type (
	clientGoHooks   struct{}
	rateLimiterHook struct{}
)

// Observe implements clientmetrics.LatencyMetric for request latency. The
// URL is left out: it names objects, and labels must stay bounded.
func (clientGoHooks) Observe(_ context.Context, verb string, _ url.URL, latency time.Duration) {
	if m := clientGoSlot.Load(); m != nil {
		m.clientLatency.WithLabelValues(verb).Observe(latency.Seconds())
	}
}

// Increment implements clientmetrics.ResultMetric. The host is left out:
// a process talks to one API server.
func (clientGoHooks) Increment(_ context.Context, code, method, _ string) {
	if m := clientGoSlot.Load(); m != nil {
		m.clientResults.WithLabelValues(code, method).Inc()
	}
}

// Observe implements clientmetrics.LatencyMetric for rate-limiter waits.
func (rateLimiterHook) Observe(_ context.Context, verb string, _ url.URL, latency time.Duration) {
	if m := clientGoSlot.Load(); m != nil {
		m.clientRateLimiter.WithLabelValues(verb).Observe(latency.Seconds())
	}
}
