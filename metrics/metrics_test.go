package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

func newMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// value returns the value of the one sample of family name whose labels
// include want: a counter's or gauge's value, a histogram's count.
func value(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// count returns how many samples family name has.
func count(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func TestFamiliesFollowConventions(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Families() {
		if seen[f.Name] {
			t.Errorf("%s: defined twice", f.Name)
		}
		seen[f.Name] = true
		if !strings.HasPrefix(f.Name, "bindkit_") {
			t.Errorf("%s: not prefixed bindkit_", f.Name)
		}
		if (f.Type == Counter) != strings.HasSuffix(f.Name, "_total") {
			t.Errorf("%s: a %s; counters, and only counters, end in _total", f.Name, f.Type)
		}
		if f.Type == Histogram && !strings.HasSuffix(f.Name, "_seconds") && !strings.HasSuffix(f.Name, "_bytes") {
			t.Errorf("%s: a histogram not in a base unit (seconds, bytes)", f.Name)
		}
		if (f.Type == Histogram) != (len(f.Buckets) > 0) {
			t.Errorf("%s: buckets %v for a %s", f.Name, f.Buckets, f.Type)
		}
		for _, l := range f.Labels {
			// Names of Bindings or subjects would make series without bound.
			if l == "name" || l == "namespace" || l == "binding" || l == "subject" || l == "key" {
				t.Errorf("%s: label %q is unbounded", f.Name, l)
			}
		}
		if f.Help == "" {
			t.Errorf("%s: no help", f.Name)
		}
	}
}

// exercise touches every family once.
func exercise(t *testing.T, m *Metrics) {
	t.Helper()
	m.Admission().ObserveRoute("/p")(webhook.Admission{Operation: admissionv1.Create, Outcome: webhook.OutcomePatched, Duration: time.Millisecond, PatchBytes: 100})
	c := m.Controllers()
	c.Reconciled("c", controller.OutcomeSuccess, time.Millisecond)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "c", MetricsProvider: c})
	q.Add("k")
	k, _ := q.Get()
	q.AddRateLimited(k)
	q.Done(k)
	q.ShutDown()
	c.NewUnfinishedWorkSecondsMetric("c").Set(0)
	c.NewLongestRunningProcessorSecondsMetric("c").Set(0)
	b := m.Controllers().(psbinding.Observer)
	gr := schema.GroupResource{Group: "bindkit.dev", Resource: "githubbindings"}
	b.SubjectPatched(gr, true)
	b.SubjectConflict(gr)
	b.SubjectsBound(gr, types.NamespacedName{Namespace: "ns", Name: "b"}, 1)
	m.Certificates().CertificatesExpire(time.Now(), time.Now())
	m.Certificates().CertificateRotated(true)
	m.clientLatency.WithLabelValues("GET").Observe(0.1)
	m.clientRateLimiter.WithLabelValues("GET").Observe(0)
	m.clientResults.WithLabelValues("200", "GET").Inc()
	m.WatchLeaders(fakeLeader{"c", true})
	m.WatchIndexes(fakeIndex{"/p", 3, gr})
	m.Controllers().(psbinding.AdmissionObserver).WebhookScoped("cfg", 10001, true)
	ro := m.Controllers().(psbinding.RolloutObserver)
	ro.RolloutWave(gr)
	ro.RolloutHalted(gr)
	ro.RolloutRolledBack(gr, 3)
	co := m.Controllers().(psbinding.RolloutControlObserver)
	co.RolloutControl(gr, psbinding.ControlPause)
	co.RolloutState(gr, types.NamespacedName{Namespace: "ns", Name: "b"}, psbinding.StatePaused)
}

// The fallback of a webhook's namespaceSelector is counted once per
// engagement, and the gauge says how many namespaces it names.
func TestWebhookScopedCountsFallbacks(t *testing.T) {
	m, _ := newMetrics(t)
	o := m.Controllers().(psbinding.AdmissionObserver)
	for _, step := range []struct {
		namespaces int
		all        bool
	}{{3, false}, {10001, true}, {10002, true}, {9000, false}, {10001, true}} {
		o.WebhookScoped("cfg", step.namespaces, step.all)
	}
	value := func(c interface{ Write(*dto.Metric) error }) float64 {
		var d dto.Metric
		if err := c.Write(&d); err != nil {
			t.Fatal(err)
		}
		if d.Counter != nil {
			return d.Counter.GetValue()
		}
		return d.Gauge.GetValue()
	}
	if got := value(m.selectorFallbacks.WithLabelValues("cfg")); got != 2 {
		t.Errorf("fallbacks counted: %v, want 2", got)
	}
	if got := value(m.selectorNamespaces.WithLabelValues("cfg")); got != 0 {
		t.Errorf("namespaces while fallen back: %v, want 0", got)
	}
}

func TestNewRegistersEveryFamily(t *testing.T) {
	m, reg := newMetrics(t)
	exercise(t, m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	for _, f := range Families() {
		want = append(want, f.Name)
		for _, mf := range mfs {
			if mf.GetName() == f.Name && !strings.EqualFold(mf.GetType().String(), string(f.Type)) {
				t.Errorf("%s: registered as a %s, described as a %s", f.Name, mf.GetType(), f.Type)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gathered families (-want +got):\n%s", diff)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if _, err := New(reg); err == nil {
		t.Error("New on a registry that already holds bindkit's metrics: no error")
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil): no error")
	}
}

func TestNewRegistryHasRuntimeMetrics(t *testing.T) {
	reg := NewRegistry()
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if n := count(t, reg, name); n != 1 {
			t.Errorf("%s: %d samples, want 1", name, n)
		}
	}
}

func TestAdmissionCounts(t *testing.T) {
	m, reg := newMetrics(t)
	observe := m.Admission().ObserveRoute("/githubbindings")
	for _, a := range []webhook.Admission{
		{Operation: admissionv1.Create, Outcome: webhook.OutcomePatched, PatchBytes: 300, Duration: 2 * time.Millisecond},
		{Operation: admissionv1.Create, Outcome: webhook.OutcomePatched, PatchBytes: 5000, Duration: time.Millisecond},
		{Operation: admissionv1.Update, Outcome: webhook.OutcomeUnchanged, DryRun: true},
		{Operation: admissionv1.Create, Outcome: webhook.OutcomeUntouched},
		{Operation: "MADE-UP-BY-A-CALLER", Outcome: webhook.OutcomeDenied},
		{Operation: "", Outcome: webhook.OutcomeRefused},
		{Operation: "", Outcome: webhook.Outcome(99)}, // unknown: dropped
	} {
		observe(a)
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"path": "/githubbindings", "operation": "CREATE", "outcome": "patched", "dry_run": "false"}, 2},
		{map[string]string{"operation": "UPDATE", "outcome": "unchanged", "dry_run": "true"}, 1},
		{map[string]string{"operation": "CREATE", "outcome": "untouched"}, 1},
		{map[string]string{"operation": "UNKNOWN", "outcome": "denied"}, 1},
		{map[string]string{"operation": "UNKNOWN", "outcome": "refused"}, 1},
	} {
		if got := value(t, reg, "bindkit_admission_requests_total", c.labels); got != c.want {
			t.Errorf("requests %v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := count(t, reg, "bindkit_admission_requests_total"); n != 5 {
		t.Errorf("%d request series, want 5 (an unknown operation is UNKNOWN)", n)
	}
	if got := value(t, reg, "bindkit_admission_duration_seconds", map[string]string{"outcome": "patched"}); got != 2 {
		t.Errorf("patched durations observed = %v, want 2", got)
	}
	if got := value(t, reg, "bindkit_admission_patch_bytes", map[string]string{"path": "/githubbindings"}); got != 2 {
		t.Errorf("patch sizes observed = %v, want 2", got)
	}
}

func TestControllerAndQueueMetrics(t *testing.T) {
	m, reg := newMetrics(t)
	obs := m.Controllers()
	r := controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		if key == "bad" {
			return controller.NewPermanentError(context.Canceled)
		}
		return nil
	})
	impl := controller.NewImpl(r, nil, "githubbindings")
	impl.EnqueueKey("ns/a")
	impl.EnqueueKey("bad")
	ctx, cancel := context.WithCancel(controller.WithObserver(context.Background(), obs))
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, 1) }()
	deadline := time.Now().Add(30 * time.Second)
	for value(t, reg, "bindkit_reconcile_duration_seconds", nil) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"bindkit_reconcile_total", map[string]string{"controller": "githubbindings", "outcome": "success"}, 1},
		{"bindkit_reconcile_total", map[string]string{"controller": "githubbindings", "outcome": "permanent"}, 1},
		{"bindkit_reconcile_duration_seconds", map[string]string{"controller": "githubbindings"}, 2},
		{"bindkit_workqueue_adds_total", map[string]string{"controller": "githubbindings"}, 2},
		{"bindkit_workqueue_queue_duration_seconds", map[string]string{"controller": "githubbindings"}, 2},
		{"bindkit_workqueue_work_duration_seconds", map[string]string{"controller": "githubbindings"}, 2},
		{"bindkit_workqueue_depth", map[string]string{"controller": "githubbindings"}, 0},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s %v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestSubjectsBoundSumsBindings(t *testing.T) {
	m, reg := newMetrics(t)
	b := m.Controllers().(psbinding.Observer)
	gh := schema.GroupResource{Group: "bindkit.dev", Resource: "githubbindings"}
	cfg := schema.GroupResource{Group: "bindkit.dev", Resource: "configbindings"}
	bound := func(gr schema.GroupResource) float64 {
		return value(t, reg, "bindkit_subjects_bound", map[string]string{"resource": gr.String()})
	}
	b.SubjectsBound(gh, types.NamespacedName{Namespace: "a", Name: "x"}, 3)
	b.SubjectsBound(gh, types.NamespacedName{Namespace: "b", Name: "x"}, 2)
	b.SubjectsBound(cfg, types.NamespacedName{Namespace: "a", Name: "x"}, 7)
	if got := bound(gh); got != 5 {
		t.Errorf("githubbindings bound = %v, want 5", got)
	}
	b.SubjectsBound(gh, types.NamespacedName{Namespace: "a", Name: "x"}, 1) // a reconcile later
	b.SubjectsBound(gh, types.NamespacedName{Namespace: "b", Name: "x"}, 0) // deleted
	b.SubjectsBound(gh, types.NamespacedName{Namespace: "b", Name: "x"}, 0) // reported gone twice
	if got, want := []float64{bound(gh), bound(cfg)}, []float64{1, 7}; !slices.Equal(got, want) {
		t.Errorf("bound = %v, want %v", got, want)
	}
	if n := len(m.bound[gh]); n != 1 {
		t.Errorf("%d Bindings remembered, want 1: a Binding reported gone is forgotten", n)
	}
	b.SubjectPatched(gh, true)
	b.SubjectPatched(gh, true)
	b.SubjectPatched(gh, false)
	b.SubjectConflict(gh)
	if got := value(t, reg, "bindkit_subject_patches_total", map[string]string{"resource": "githubbindings.bindkit.dev", "action": "bind"}); got != 2 {
		t.Errorf("bind patches = %v, want 2", got)
	}
	if got := value(t, reg, "bindkit_subject_patches_total", map[string]string{"action": "unbind"}); got != 1 {
		t.Errorf("unbind patches = %v, want 1", got)
	}
	if got := value(t, reg, "bindkit_subject_patch_conflicts_total", nil); got != 1 {
		t.Errorf("conflicts = %v, want 1", got)
	}
}

func TestCertificateMetrics(t *testing.T) {
	m, reg := newMetrics(t)
	c := m.Certificates()
	ca, serving := time.Unix(2_000_000_000, 0), time.Unix(1_800_000_000, 0)
	c.CertificatesExpire(ca, serving)
	c.CertificateRotated(true)
	c.CertificateRotated(false)
	c.CertificateRotated(false)
	for _, v := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"bindkit_certificate_expiry_timestamp_seconds", map[string]string{"certificate": "ca"}, 2_000_000_000},
		{"bindkit_certificate_expiry_timestamp_seconds", map[string]string{"certificate": "serving"}, 1_800_000_000},
		{"bindkit_certificate_rotations_total", map[string]string{"certificate": "ca"}, 1},
		{"bindkit_certificate_rotations_total", map[string]string{"certificate": "serving"}, 2},
	} {
		if got := value(t, reg, v.name, v.labels); got != v.want {
			t.Errorf("%s %v = %v, want %v", v.name, v.labels, got, v.want)
		}
	}
	c.CertificatesExpire(time.Time{}, time.Time{}) // the Secret was lost
	if got := value(t, reg, "bindkit_certificate_expiry_timestamp_seconds", map[string]string{"certificate": "serving"}); got != 0 {
		t.Errorf("serving expiry without a certificate = %v, want 0", got)
	}
}

type fakeLeader struct {
	name   string
	leader bool
}

func (l fakeLeader) Name() string   { return l.name }
func (l fakeLeader) IsLeader() bool { return l.leader }

type fakeIndex struct {
	path string
	n    int
	gr   schema.GroupResource
}

func (i fakeIndex) Path() string                          { return i.path }
func (i fakeIndex) IndexedBindings() int                  { return i.n }
func (i fakeIndex) BindingResource() schema.GroupResource { return i.gr }

func TestScrapedGauges(t *testing.T) {
	m, reg := newMetrics(t)
	impl := controller.NewImpl(controller.ReconcilerFunc(func(context.Context, string) error { return nil }), nil, "certificates")
	m.WatchLeaders(impl, fakeLeader{"follower", false})
	m.WatchIndexes(fakeIndex{"/githubbindings", 4, schema.GroupResource{Group: "bindkit.dev", Resource: "githubbindings"}})
	leads := func() float64 {
		return value(t, reg, "bindkit_leader", map[string]string{"controller": "certificates"})
	}
	if got := leads(); got != 0 {
		t.Errorf("leader before promotion = %v", got)
	}
	impl.Promote()
	if got := leads(); got != 1 {
		t.Errorf("leader after promotion = %v", got)
	}
	if got := value(t, reg, "bindkit_leader", map[string]string{"controller": "follower"}); got != 0 {
		t.Errorf("follower = %v", got)
	}
	if got := value(t, reg, "bindkit_admission_index_bindings", map[string]string{"path": "/githubbindings", "resource": "githubbindings.bindkit.dev"}); got != 4 {
		t.Errorf("index = %v, want 4", got)
	}
}

// TestClientGoMetricsFollowTheAttachedProcess makes requests with a
// client-go client and checks they count in the Metrics attached last,
// then in the one before once the last detaches, and nowhere with none.
func TestClientGoMetricsFollowTheAttachedProcess(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[]}`))
	}))
	defer api.Close()
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: api.URL, QPS: -1})
	list := func() {
		t.Helper()
		if _, err := client.CoreV1().Namespaces().List(context.Background(), listOptions()); err != nil {
			t.Fatal(err)
		}
	}
	requests := func(reg prometheus.Gatherer) float64 {
		return value(t, reg, "bindkit_client_requests_total", map[string]string{"code": "200", "method": "GET"})
	}
	first, firstReg := newMetrics(t)
	second, secondReg := newMetrics(t)
	detachFirst := first.AttachClientGo()
	list()
	detachSecond := second.AttachClientGo()
	list()
	list()
	detachSecond()
	list()
	detachFirst()
	list() // counted nowhere
	if got, want := []float64{requests(firstReg), requests(secondReg)}, []float64{2, 2}; !slices.Equal(got, want) {
		t.Errorf("requests counted (first, second) = %v, want %v", got, want)
	}
	if got := value(t, firstReg, "bindkit_client_request_duration_seconds", map[string]string{"verb": "GET"}); got != 2 {
		t.Errorf("latencies observed = %v, want 2", got)
	}
}

func listOptions() metav1.ListOptions { return metav1.ListOptions{} }

// TestAdmissionObserverAllocatesNothing shows the admission path pays no
// allocation for its metrics once a route's series exist.
func TestAdmissionObserverAllocatesNothing(t *testing.T) {
	m, _ := newMetrics(t)
	observe := m.Admission().ObserveRoute("/bindings")
	a := webhook.Admission{Operation: admissionv1.Create, Outcome: webhook.OutcomePatched, Duration: time.Millisecond, PatchBytes: 300}
	observe(a) // the series are made on first use
	if n := testing.AllocsPerRun(100, func() { observe(a) }); n != 0 {
		t.Errorf("observing an admission allocates %v times, want 0", n)
	}
}

// BenchmarkObserveAdmission is what metrics add to one admission request
// (bench/RESULTS.md compares it with the round trip).
func BenchmarkObserveAdmission(b *testing.B) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	observe := m.Admission().ObserveRoute("/bindings")
	a := webhook.Admission{Operation: admissionv1.Create, Outcome: webhook.OutcomePatched, Duration: time.Millisecond, PatchBytes: 300}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			observe(a)
		}
	})
}
