package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Leader is a controller whose leadership the bindkit_leader gauge
// reports: a *controller.Impl.
type Leader interface {
	Name() string
	IsLeader() bool
}

// Index is an admission index whose size the
// bindkit_admission_index_bindings gauge reports: a
// *psbinding.AdmissionReconciler.
type Index interface {
	Path() string
	IndexedBindings() int
	BindingResource() schema.GroupResource
}

// WatchLeaders makes every scrape report whether each of leaders leads.
// Reading at scrape time costs the controllers nothing and cannot miss a
// change of leadership that happened before the metrics were wired.
func (m *Metrics) WatchLeaders(leaders ...Leader) {
	m.scraped.mu.Lock()
	defer m.scraped.mu.Unlock()
	m.scraped.leaders = append(m.scraped.leaders, leaders...)
}

// WatchIndexes makes every scrape report how many Bindings each of
// indexes holds.
func (m *Metrics) WatchIndexes(indexes ...Index) {
	m.scraped.mu.Lock()
	defer m.scraped.mu.Unlock()
	m.scraped.indexes = append(m.scraped.indexes, indexes...)
}

// scrapeCollector reads its gauges from their sources when scraped.
type scrapeCollector struct {
	leader, index *prometheus.Desc

	mu      sync.Mutex
	leaders []Leader
	indexes []Index
}

func newScrapeCollector() *scrapeCollector {
	return &scrapeCollector{leader: newDesc(leader), index: newDesc(admissionIndexBindings)}
}

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.leader
	ch <- c.index
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	leaders, indexes := c.leaders, c.indexes
	c.mu.Unlock()
	for _, l := range leaders {
		v := 0.0
		if l.IsLeader() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, v, l.Name())
	}
	for _, ix := range indexes {
		ch <- prometheus.MustNewConstMetric(c.index, prometheus.GaugeValue, float64(ix.IndexedBindings()), ix.Path(), ix.BindingResource().String())
	}
}
