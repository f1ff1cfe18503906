package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/bindkit/bindkit/webhook"
)

// Admission returns the webhook.Observer to set in webhook.Options: it
// counts every answered admission request and records its duration and
// patch size.
func (m *Metrics) Admission() webhook.Observer { return admissionObserver{m} }

type admissionObserver struct{ m *Metrics }

// operations are the label values of the operation label; anything else
// (a caller may send any string) is operationUnknown, so a hostile caller
// cannot grow the number of series.
var operations = [...]admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect, operationUnknown}

func operationIndex(op admissionv1.Operation) int {
	switch op {
	case admissionv1.Create:
		return 0
	case admissionv1.Update:
		return 1
	case admissionv1.Delete:
		return 2
	case admissionv1.Connect:
		return 3
	}
	return 4
}

// admissionRoute holds one webhook path's series, each made on first use
// and kept, so answering a request costs no label lookup.
type admissionRoute struct {
	m        *Metrics
	path     string
	requests [len(operations)][len(outcomeLabels)][2]atomic.Pointer[prometheus.Counter]
	duration [len(outcomeLabels)]atomic.Pointer[prometheus.Observer]
	patch    prometheus.Observer
}

var outcomeLabels = func() [8]string {
	var out [8]string
	for _, o := range webhook.Outcomes() {
		out[o] = o.String()
	}
	return out
}()

// ObserveRoute implements webhook.Observer.
func (o admissionObserver) ObserveRoute(path string) func(webhook.Admission) {
	rt := &admissionRoute{m: o.m, path: path, patch: o.m.admissionPatch.WithLabelValues(path)}
	return rt.observe
}

func (rt *admissionRoute) observe(a webhook.Admission) {
	outcome := int(a.Outcome)
	if outcome >= len(outcomeLabels) {
		return // an Outcome this package does not know: never sent by webhook
	}
	op, dry := operationIndex(a.Operation), 0
	if a.DryRun {
		dry = 1
	}
	counter := rt.requests[op][outcome][dry].Load()
	if counter == nil {
		c := rt.m.admissionRequests.WithLabelValues(rt.path, string(operations[op]), outcomeLabels[outcome], strconv.FormatBool(a.DryRun))
		counter = &c
		rt.requests[op][outcome][dry].Store(counter)
	}
	(*counter).Inc()
	duration := rt.duration[outcome].Load()
	if duration == nil {
		d := rt.m.admissionDuration.WithLabelValues(rt.path, outcomeLabels[outcome])
		duration = &d
		rt.duration[outcome].Store(duration)
	}
	(*duration).Observe(a.Duration.Seconds())
	if a.Outcome == webhook.OutcomePatched {
		rt.patch.Observe(float64(a.PatchBytes))
	}
}
