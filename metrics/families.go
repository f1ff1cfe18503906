package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Type is a Prometheus metric type.
type Type string

// The metric types bindkit uses.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Family describes one metric family bindkit exports: its full name, type,
// labels and meaning. New builds every family from this table, and the
// docs/operators-guide.md's table of metrics, config/monitoring's alert rules and dashboard
// are checked against it.
type Family struct {
	Name   string
	Type   Type
	Labels []string
	Help   string
	// Buckets of a histogram, in its unit.
	Buckets []float64
}

// Buckets of the histograms: admissions are answered in microseconds to
// the kube-apiserver's webhook timeout (at most 30s); reconciles and API
// requests take milliseconds to a minute; patches are bytes to a MiB.
var (
	admissionBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	durationBuckets  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	patchBuckets     = prometheus.ExponentialBuckets(64, 4, 9) // 64 B to 4 MiB
)

// Names of the families, used where they are built.
const (
	admissionRequests        = "bindkit_admission_requests_total"
	admissionDuration        = "bindkit_admission_duration_seconds"
	admissionPatchBytes      = "bindkit_admission_patch_bytes"
	admissionIndexBindings   = "bindkit_admission_index_bindings"
	reconciles               = "bindkit_reconcile_total"
	reconcileDuration        = "bindkit_reconcile_duration_seconds"
	leader                   = "bindkit_leader"
	subjectPatches           = "bindkit_subject_patches_total"
	subjectConflicts         = "bindkit_subject_patch_conflicts_total"
	subjectsBound            = "bindkit_subjects_bound"
	rolloutEvents            = "bindkit_rollout_events_total"
	rollouts                 = "bindkit_rollouts"
	selectorNamespaces       = "bindkit_webhook_selector_namespaces"
	selectorFallbacks        = "bindkit_webhook_selector_fallbacks_total"
	certificateExpiry        = "bindkit_certificate_expiry_timestamp_seconds"
	certificateRotations     = "bindkit_certificate_rotations_total"
	queueDepth               = "bindkit_workqueue_depth"
	queueAdds                = "bindkit_workqueue_adds_total"
	queueLatency             = "bindkit_workqueue_queue_duration_seconds"
	queueWorkDuration        = "bindkit_workqueue_work_duration_seconds"
	queueUnfinished          = "bindkit_workqueue_unfinished_work_seconds"
	queueLongestRunning      = "bindkit_workqueue_longest_running_processor_seconds"
	queueRetries             = "bindkit_workqueue_retries_total"
	clientRequestDuration    = "bindkit_client_request_duration_seconds"
	clientRequests           = "bindkit_client_requests_total"
	clientRateLimiterWait    = "bindkit_client_rate_limiter_duration_seconds"
	labelPath                = "path"
	labelConfiguration       = "configuration"
	labelOperation           = "operation"
	labelOutcome             = "outcome"
	labelDryRun              = "dry_run"
	labelResource            = "resource"
	labelController          = "controller"
	labelAction              = "action"
	labelEvent               = "event"
	labelState               = "state"
	labelCertificate         = "certificate"
	labelVerb                = "verb"
	labelCode                = "code"
	labelMethod              = "method"
	operationUnknown         = "UNKNOWN"
	certificateCA            = "ca"
	certificateServing       = "serving"
	actionBind, actionUnbind = "bind", "unbind"
	eventWave, eventHalt     = "wave", "halt"
	eventRollback            = "rollback"
)

var families = []Family{
	{Name: admissionRequests, Type: Counter, Labels: []string{labelPath, labelOperation, labelOutcome, labelDryRun},
		Help: "Admission requests answered, by webhook path, operation (CREATE, UPDATE, DELETE, CONNECT; UNKNOWN before decoding), outcome (patched, unchanged, untouched, denied, errored, overloaded, refused, invalid) and dry run."},
	{Name: admissionDuration, Type: Histogram, Labels: []string{labelPath, labelOutcome}, Buckets: admissionBuckets,
		Help: "Time from an admission request's headers to its answer being written, in seconds, by webhook path and outcome."},
	{Name: admissionPatchBytes, Type: Histogram, Labels: []string{labelPath}, Buckets: patchBuckets,
		Help: "Size of the JSON patches admission answered with, in bytes, by webhook path."},
	{Name: admissionIndexBindings, Type: Gauge, Labels: []string{labelPath, labelResource},
		Help: "Bindings in the index an admission controller answers from, by webhook path and Binding resource; every replica keeps one."},
	{Name: reconciles, Type: Counter, Labels: []string{labelController, labelOutcome},
		Help: "Reconciles, by controller and outcome (success, requeue, error, permanent, demoted)."},
	{Name: reconcileDuration, Type: Histogram, Labels: []string{labelController}, Buckets: durationBuckets,
		Help: "Time one reconcile took, in seconds, by controller."},
	{Name: leader, Type: Gauge, Labels: []string{labelController},
		Help: "1 while this replica leads the controller (and so writes), 0 while it follows."},
	{Name: subjectPatches, Type: Counter, Labels: []string{labelResource, labelAction},
		Help: "Subjects patched by the reconciler, by Binding resource and action (bind, unbind)."},
	{Name: subjectConflicts, Type: Counter, Labels: []string{labelResource},
		Help: "Subject patches refused because the subject changed since it was read (each is read again and retried), by Binding resource."},
	{Name: rolloutEvents, Type: Counter, Labels: []string{labelResource, labelEvent},
		Help: "Rollouts paced by a rollout policy, by Binding resource and event: wave (a wave of subjects started), halt (a rollout halted on a subject that did not roll out in time), rollback (a subject of a halted wave rolled back), and an operator's controls: pause, resume, undo (an undo started), plan (a paused Binding's plan published for a new generation)."},
	{Name: rollouts, Type: Gauge, Labels: []string{labelResource, labelState},
		Help: "Bindings paced by a rollout, by Binding resource and the state of their rollout (rolling-out, paused, halted, undoing, undone, complete), as this replica last reconciled them (the leader's is current)."},
	{Name: subjectsBound, Type: Gauge, Labels: []string{labelResource},
		Help: "Subjects bound by the Bindings of a resource, as this replica last reconciled them (the leader's is current)."},
	{Name: selectorNamespaces, Type: Gauge, Labels: []string{labelConfiguration},
		Help: "Namespaces holding a Binding that the leader's webhook configuration names in its namespaceSelector, by MutatingWebhookConfiguration; 0 while the selector falls back to every namespace."},
	{Name: selectorFallbacks, Type: Counter, Labels: []string{labelConfiguration},
		Help: "Times the webhook's namespaceSelector fell back to every namespace but the protected ones (more namespaces hold Bindings than MaxSelectorNamespaces, default 10000), by MutatingWebhookConfiguration."},
	{Name: certificateExpiry, Type: Gauge, Labels: []string{labelCertificate},
		Help: "When the webhook's current CA (certificate=ca) and serving certificate (certificate=serving) expire, in Unix seconds; 0 while the Secret holds none."},
	{Name: certificateRotations, Type: Counter, Labels: []string{labelCertificate},
		Help: "New CAs (certificate=ca) and serving certificates (certificate=serving) this replica wrote into the Secret, the first ones included."},
	{Name: queueDepth, Type: Gauge, Labels: []string{labelController},
		Help: "Keys waiting in the controller's work queue."},
	{Name: queueAdds, Type: Counter, Labels: []string{labelController},
		Help: "Keys added to the controller's work queue."},
	{Name: queueLatency, Type: Histogram, Labels: []string{labelController}, Buckets: durationBuckets,
		Help: "Time a key waited in the controller's work queue before a worker took it, in seconds."},
	{Name: queueWorkDuration, Type: Histogram, Labels: []string{labelController}, Buckets: durationBuckets,
		Help: "Time a worker held a key of the controller's work queue, in seconds."},
	{Name: queueUnfinished, Type: Gauge, Labels: []string{labelController},
		Help: "Seconds of work in progress not yet done, summed over the controller's workers; growing, it shows a stuck worker."},
	{Name: queueLongestRunning, Type: Gauge, Labels: []string{labelController},
		Help: "Seconds the longest-running worker of the controller has held its key."},
	{Name: queueRetries, Type: Counter, Labels: []string{labelController},
		Help: "Keys the controller's work queue took back for a retry after a failure."},
	{Name: clientRequestDuration, Type: Histogram, Labels: []string{labelVerb}, Buckets: durationBuckets,
		Help: "Latency of the process's requests to the API server, in seconds, by verb."},
	{Name: clientRequests, Type: Counter, Labels: []string{labelCode, labelMethod},
		Help: "Requests the process sent the API server, by HTTP status code (<error> when none came back) and method."},
	{Name: clientRateLimiterWait, Type: Histogram, Labels: []string{labelVerb}, Buckets: durationBuckets,
		Help: "Time requests waited on the client's rate limiter (--kube-api-qps, --kube-api-burst) before being sent, in seconds, by verb."},
}

// Families returns every metric family New registers, in a stable order.
func Families() []Family {
	out := slices.Clone(families)
	for i := range out {
		out[i].Labels = slices.Clone(out[i].Labels)
		out[i].Buckets = slices.Clone(out[i].Buckets)
	}
	return out
}

func family(name string) Family {
	i := slices.IndexFunc(families, func(f Family) bool { return f.Name == name })
	if i < 0 {
		panic("metrics: no family " + name) // a typo in this package
	}
	return families[i]
}

func newCounterVec(name string) *prometheus.CounterVec {
	f := family(name)
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name, Help: f.Help}, f.Labels)
}

func newGaugeVec(name string) *prometheus.GaugeVec {
	f := family(name)
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.Name, Help: f.Help}, f.Labels)
}

func newHistogramVec(name string) *prometheus.HistogramVec {
	f := family(name)
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: f.Name, Help: f.Help, Buckets: f.Buckets}, f.Labels)
}

func newDesc(name string) *prometheus.Desc {
	f := family(name)
	return prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
}
