package config

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/metrics"
)

// ruleFile is a Prometheus rule file, as much of it as config/monitoring
// uses; unknown fields are errors.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// dashboard is a Grafana dashboard, as much of it as the test reads.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// strictJSON decodes data into v, refusing unknown fields.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// knownSeries maps every series name a query may use to its family's
// labels: bindkit's families (with a histogram's _bucket, _sum and
// _count) and the runtime ones the dashboard reads.
func knownSeries() map[string][]string {
	out := map[string][]string{
		"go_goroutines":                 {},
		"process_resident_memory_bytes": {},
	}
	for _, f := range metrics.Families() {
		out[f.Name] = f.Labels
		if f.Type == metrics.Histogram {
			out[f.Name+"_bucket"] = append(slices.Clone(f.Labels), "le")
			out[f.Name+"_sum"] = f.Labels
			out[f.Name+"_count"] = f.Labels
		}
	}
	return out
}

var (
	// A series name, with its selector's braces when it has any.
	seriesRE = regexp.MustCompile(`\b((?:bindkit|go|process)_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	// A label matcher's label name.
	matcherRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// Labels every scraped series carries from the scrape (Kubernetes
	// service discovery's relabelling).
	targetLabels = []string{"namespace", "pod", "job", "instance"}
)

// checkQuery checks one PromQL expression: it uses at least one series,
// every series it uses exists, every label it matches on is one of the
// series', and its brackets balance. It returns what is wrong.
func checkQuery(expr string, known map[string][]string) []string {
	var problems []string
	matches := seriesRE.FindAllStringSubmatch(expr, -1)
	if len(matches) == 0 {
		problems = append(problems, "uses no bindkit, go or process series")
	}
	for _, m := range matches {
		labels, ok := known[m[1]]
		if !ok {
			problems = append(problems, "uses "+m[1]+", which no bindkit process exports")
			continue
		}
		for _, lm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(labels, lm[1]) && !slices.Contains(targetLabels, lm[1]) {
				problems = append(problems, "matches "+m[1]+" on label "+lm[1]+", which it does not have")
			}
		}
	}
	for _, pair := range []string{"()", "[]", "{}"} {
		if strings.Count(expr, pair[:1]) != strings.Count(expr, pair[1:]) {
			problems = append(problems, "unbalanced "+pair)
		}
	}
	return problems
}

// TestMonitoringAlertRules parses config/monitoring/alerts.yaml as
// Prometheus reads a rule file and checks every rule: named, with a
// duration, a severity and a summary, and a query on metrics that exist.
func TestMonitoringAlertRules(t *testing.T) {
	data, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := utilyaml.ToJSON(data)
	if err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var rules ruleFile
	if err := strictJSON(raw, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	known := knownSeries()
	seen := map[string]bool{}
	used := map[string]bool{}
	n := 0
	for _, g := range rules.Groups {
		if g.Name == "" {
			t.Errorf("alerts.yaml: a group without a name")
		}
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("alerts.yaml: rule %d of group %s: alert name %q empty or repeated", n, g.Name, r.Alert)
			}
			seen[r.Alert] = true
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("alerts.yaml: %s: for %q is not a positive duration", r.Alert, r.For)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alerts.yaml: %s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alerts.yaml: %s: no summary or description", r.Alert)
			}
			for _, p := range checkQuery(r.Expr, known) {
				t.Errorf("alerts.yaml: %s: %s", r.Alert, p)
			}
			for _, m := range seriesRE.FindAllStringSubmatch(r.Expr, -1) {
				used[m[1]] = true
			}
		}
	}
	// What the issue asks alerts for: certificate expiry, admission
	// errors, reconcile failures.
	for _, name := range []string{"bindkit_certificate_expiry_timestamp_seconds", "bindkit_admission_requests_total", "bindkit_reconcile_total"} {
		if !used[name] {
			t.Errorf("alerts.yaml: no rule uses %s", name)
		}
	}
}

// TestMonitoringDashboard parses config/monitoring/dashboard.json and
// checks every panel's queries use metrics that exist, and that the
// dashboard shows every bindkit family.
func TestMonitoringDashboard(t *testing.T) {
	data, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard.json: title %q, uid %q, %d panels: want a title, a uid and panels", d.Title, d.UID, len(d.Panels))
	}
	known := knownSeries()
	used := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("dashboard.json: panel %d %q: repeated id, no title or no queries", p.ID, p.Title)
		}
		ids[p.ID] = true
		for _, q := range p.Targets {
			for _, problem := range checkQuery(q.Expr, known) {
				t.Errorf("dashboard.json: panel %q query %s: %s", p.Title, q.RefID, problem)
			}
			for _, m := range seriesRE.FindAllStringSubmatch(q.Expr, -1) {
				used[strings.TrimSuffix(m[1], "_bucket")] = true
			}
		}
	}
	for _, f := range metrics.Families() {
		if !used[f.Name] {
			t.Errorf("dashboard.json: no panel shows %s", f.Name)
		}
	}
}

// TestCheckQueryFindsMistakes shows the checks above fail on the
// mistakes they are for.
func TestCheckQueryFindsMistakes(t *testing.T) {
	known := knownSeries()
	for _, tt := range []struct{ expr, want string }{
		{`rate(bindkit_admission_request_total[5m])`, "uses bindkit_admission_request_total, which no bindkit process exports"},
		{`bindkit_reconcile_total{binding="x"}`, "matches bindkit_reconcile_total on label binding, which it does not have"},
		{`sum(rate(bindkit_reconcile_total[5m])`, "unbalanced ()"},
		{`up == 0`, "uses no bindkit, go or process series"},
	} {
		if got := checkQuery(tt.expr, known); !slices.Contains(got, tt.want) {
			t.Errorf("checkQuery(%s) = %q, want it to include %q", tt.expr, got, tt.want)
		}
	}
	if got := checkQuery(`histogram_quantile(0.99, sum by (le) (rate(bindkit_admission_duration_seconds_bucket{path="/x", namespace=~"a"}[5m])))`, known); len(got) != 0 {
		t.Errorf("a valid query: %q", got)
	}
}

// serviceMonitor is a Prometheus Operator ServiceMonitor, as much of it as
// config/monitoring uses; unknown fields are errors.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port            string `json:"port"`
			Scheme          string `json:"scheme"`
			Path            string `json:"path"`
			BearerTokenFile string `json:"bearerTokenFile"`
			TLSConfig       struct {
				InsecureSkipVerify bool `json:"insecureSkipVerify"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestServiceMonitorScrapesTheMetricsService: the ServiceMonitor selects
// config/'s metrics Service, whose port reaches the Deployment's metrics
// port, where sharedmain serves by default; it scrapes HTTPS at
// sharedmain.MetricsPath with a bearer token, as the endpoint requires.
func TestServiceMonitorScrapesTheMetricsService(t *testing.T) {
	data, err := os.ReadFile("monitoring/servicemonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := utilyaml.ToJSON(data)
	if err != nil {
		t.Fatalf("servicemonitor.yaml: %v", err)
	}
	var sm serviceMonitor
	if err := strictJSON(raw, &sm); err != nil {
		t.Fatalf("servicemonitor.yaml: %v", err)
	}
	ms := readManifests(t, ".")
	svc := find(t, ms, "Service", "githubbinding-controller-metrics")
	deployment := find(t, ms, "Deployment", "githubbinding-controller")
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" || sm.Metadata.Namespace != svc.GetNamespace() {
		t.Errorf("servicemonitor.yaml: %s %s in %q, want a monitoring.coreos.com/v1 ServiceMonitor in %s", sm.APIVersion, sm.Kind, sm.Metadata.Namespace, svc.GetNamespace())
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.GetLabels()[k] != v {
			t.Errorf("servicemonitor.yaml selects %s=%s, which Service %s does not carry", k, v, svc.GetName())
		}
	}
	var svcPorts []struct {
		Name       string `json:"name"`
		TargetPort string `json:"targetPort"`
	}
	portsOf(t, svc, &svcPorts, "spec", "ports")
	var containerPorts []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	portsOf(t, &unstructured.Unstructured{Object: containers[0].(map[string]any)}, &containerPorts, "ports")
	podLabels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("Service %s selects pods by %s=%s, which the Deployment's pods do not carry", svc.GetName(), k, v)
		}
	}
	_, defaultPort, _ := net.SplitHostPort(sharedmain.DefaultMetricsAddress)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("servicemonitor.yaml: %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	got := map[string]string{
		"scheme": ep.Scheme, "path": ep.Path, "bearer token": ep.BearerTokenFile,
		"service port": "", "container port": "",
	}
	for _, p := range svcPorts {
		if p.Name == ep.Port {
			got["service port"] = p.TargetPort
		}
	}
	for _, p := range containerPorts {
		if p.Name == got["service port"] {
			got["container port"] = strconv.Itoa(p.ContainerPort)
		}
	}
	want := map[string]string{
		"scheme": "https", "path": sharedmain.MetricsPath, "bearer token": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"service port": "https-metrics", "container port": defaultPort,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servicemonitor.yaml's endpoint, through the Service to the container (-want +got):\n%s", diff)
	}
}

// portsOf decodes the ports at fields of obj into out.
func portsOf(t *testing.T, obj *unstructured.Unstructured, out any, fields ...string) {
	t.Helper()
	ports, _, err := unstructured.NestedSlice(obj.Object, fields...)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(ports)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s %s ports: %v", obj.GetKind(), obj.GetName(), err)
	}
}
