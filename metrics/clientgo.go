package metrics

import (
	"time"

	"github.com/bindkit/bindkit/internal/processwide"
)

// AttachClientGo makes client-go's request latency, request results and
// rate-limiter waits count in m until detach is called. client-go accepts
// its metric hooks only once per process: they are installed by
// injection/sharedmain.InstallProcessHooks (which this calls, so call
// that first where client-go is already in use), and forward to whichever
// Metrics was attached last and is still attached; a second process run in
// the same test binary (one injection/sharedmain.Run after another, or two
// at once) takes them over while it runs, and the first gets them back
// when it detaches. Requests made while none is attached are not counted.
func (m *Metrics) AttachClientGo() (detach func()) {
	processwide.Install()
	var hooks processwide.ClientGoMetrics = clientGoHooks{m}
	return processwide.ClientGoSlot.Attach(&hooks)
}

// clientGoHooks count client-go's requests in m. The URL and host are
// left out: they name objects and servers, and labels must stay bounded.
type clientGoHooks struct{ m *Metrics }

func (h clientGoHooks) RequestLatency(verb string, d time.Duration) {
	h.m.clientLatency.WithLabelValues(verb).Observe(d.Seconds())
}

func (h clientGoHooks) RateLimiterLatency(verb string, d time.Duration) {
	h.m.clientRateLimiter.WithLabelValues(verb).Observe(d.Seconds())
}

func (h clientGoHooks) RequestResult(code, method string) {
	h.m.clientResults.WithLabelValues(code, method).Inc()
}
