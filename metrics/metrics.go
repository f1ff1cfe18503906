package metrics

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are bindkit's metrics of one process, in one registry. Build
// them with New; hand Admission, Controllers, Bindings and Certificates to
// the parts they observe, and call Watch for what is read at scrape time.
// All methods are safe for concurrent use.
type Metrics struct {
	admissionRequests *prometheus.CounterVec
	admissionDuration *prometheus.HistogramVec
	admissionPatch    *prometheus.HistogramVec

	reconciles        *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec

	queueDepth, queueUnfinished, queueLongest *prometheus.GaugeVec
	queueAdds, queueRetries                   *prometheus.CounterVec
	queueLatency, queueWork                   *prometheus.HistogramVec

	subjectPatches   *prometheus.CounterVec
	subjectConflicts *prometheus.CounterVec
	subjectsBound    *prometheus.GaugeVec
	rolloutEvents    *prometheus.CounterVec
	rollouts         *prometheus.GaugeVec
	// states is each Binding's last rollout state, under boundMu.
	states map[schema.GroupResource]map[types.NamespacedName]string
	// selectorNamespaces and selectorFallbacks count how webhooks are
	// scoped; fellBack is each configuration's last state, under boundMu.
	selectorNamespaces *prometheus.GaugeVec
	selectorFallbacks  *prometheus.CounterVec
	fellBack           map[string]bool
	boundMu            sync.Mutex
	bound              map[schema.GroupResource]map[types.NamespacedName]int

	certificateExpiry    *prometheus.GaugeVec
	certificateRotations *prometheus.CounterVec

	clientLatency, clientRateLimiter *prometheus.HistogramVec
	clientResults                    *prometheus.CounterVec

	scraped *scrapeCollector
}

// New builds bindkit's metrics and registers them with reg; it fails when
// reg already holds a family of the same name (a registry serves one
// process: give each its own). Nothing is global: the metrics live only
// in reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: no registry")
	}
	m := &Metrics{
		admissionRequests: newCounterVec(admissionRequests),
		admissionDuration: newHistogramVec(admissionDuration),
		admissionPatch:    newHistogramVec(admissionPatchBytes),

		reconciles:        newCounterVec(reconciles),
		reconcileDuration: newHistogramVec(reconcileDuration),

		queueDepth:      newGaugeVec(queueDepth),
		queueAdds:       newCounterVec(queueAdds),
		queueLatency:    newHistogramVec(queueLatency),
		queueWork:       newHistogramVec(queueWorkDuration),
		queueUnfinished: newGaugeVec(queueUnfinished),
		queueLongest:    newGaugeVec(queueLongestRunning),
		queueRetries:    newCounterVec(queueRetries),

		subjectPatches:     newCounterVec(subjectPatches),
		subjectConflicts:   newCounterVec(subjectConflicts),
		subjectsBound:      newGaugeVec(subjectsBound),
		rolloutEvents:      newCounterVec(rolloutEvents),
		rollouts:           newGaugeVec(rollouts),
		states:             map[schema.GroupResource]map[types.NamespacedName]string{},
		selectorNamespaces: newGaugeVec(selectorNamespaces),
		selectorFallbacks:  newCounterVec(selectorFallbacks),
		fellBack:           map[string]bool{},
		bound:              map[schema.GroupResource]map[types.NamespacedName]int{},

		certificateExpiry:    newGaugeVec(certificateExpiry),
		certificateRotations: newCounterVec(certificateRotations),

		clientLatency:     newHistogramVec(clientRequestDuration),
		clientRateLimiter: newHistogramVec(clientRateLimiterWait),
		clientResults:     newCounterVec(clientRequests),

		scraped: newScrapeCollector(),
	}
	for _, c := range []prometheus.Collector{
		m.admissionRequests, m.admissionDuration, m.admissionPatch,
		m.reconciles, m.reconcileDuration,
		m.queueDepth, m.queueAdds, m.queueLatency, m.queueWork, m.queueUnfinished, m.queueLongest, m.queueRetries,
		m.subjectPatches, m.subjectConflicts, m.subjectsBound, m.rolloutEvents, m.rollouts,
		m.selectorNamespaces, m.selectorFallbacks,
		m.certificateExpiry, m.certificateRotations,
		m.clientLatency, m.clientRateLimiter, m.clientResults,
		m.scraped,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// NewRegistry returns a registry holding the Go runtime's and the
// process's metrics (go_*, process_*), the one a bindkit process serves
// beside its own (New). It is a new registry, never the global one.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
