package metrics

import (
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/bindkit/bindkit/controller"
)

// Controllers returns the controller.Observer to run Impls with
// (controller.WithObserver): it counts reconciles by outcome, records
// their duration, and provides each Impl's work queue with its metrics.
// It is also a psbinding.Observer (see SubjectPatched), which the
// BaseReconcilers of those Impls report their subjects to.
func (m *Metrics) Controllers() controller.Observer { return controllerObserver{m} }

type controllerObserver struct{ m *Metrics }

// Reconciled implements controller.Observer.
func (o controllerObserver) Reconciled(name string, outcome controller.Outcome, took time.Duration) {
	o.m.reconciles.WithLabelValues(name, string(outcome)).Inc()
	o.m.reconcileDuration.WithLabelValues(name).Observe(took.Seconds())
}

// The workqueue.MetricsProvider methods, called once per queue with the
// Impl's name.

func (o controllerObserver) NewDepthMetric(name string) workqueue.GaugeMetric {
	return o.m.queueDepth.WithLabelValues(name)
}

func (o controllerObserver) NewAddsMetric(name string) workqueue.CounterMetric {
	return o.m.queueAdds.WithLabelValues(name)
}

func (o controllerObserver) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return o.m.queueLatency.WithLabelValues(name)
}

func (o controllerObserver) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return o.m.queueWork.WithLabelValues(name)
}

func (o controllerObserver) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return o.m.queueUnfinished.WithLabelValues(name)
}

func (o controllerObserver) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return o.m.queueLongest.WithLabelValues(name)
}

func (o controllerObserver) NewRetriesMetric(name string) workqueue.CounterMetric {
	return o.m.queueRetries.WithLabelValues(name)
}
