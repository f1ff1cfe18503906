package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
)

// requestCounts are counters of the kube-apiserver's own metrics: requests
// on apps/v1 deployments by verb ("GET", "PATCH", ...) and calls of the
// example's admission webhook ("webhook").
type requestCounts map[string]float64

// readRequestCounts scrapes the kube-apiserver's /metrics. It says how many
// requests a timed part cost the server, whoever sent them: the controller
// and the benchmark's own watch alike.
func readRequestCounts(tb testing.TB, kube kubernetes.Interface) requestCounts {
	tb.Helper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("read kube-apiserver metrics: %v", err)
	}
	out := requestCounts{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		switch {
		case name == "apiserver_request_total" && labels["group"] == "apps" && labels["resource"] == "deployments" && labels["subresource"] == "":
			out[labels["verb"]] += value
		case name == "apiserver_admission_webhook_admission_duration_seconds_count" && labels["name"] == githubbinding.WebhookConfigurationName:
			out["webhook"] += value
		}
	}
	return out
}

// sub returns c - before, key by key.
func (c requestCounts) sub(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// parseSample reads one sample of the Prometheus text format,
// `name{k="v",...} value`; comments and other lines give ok=false. Label
// values of these metrics hold no escaped quotes or commas.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	open, closing := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || closing < open {
		return "", nil, 0, false
	}
	name = line[:open]
	labels = map[string]string{}
	for pair := range strings.SplitSeq(line[open+1:closing], ",") {
		k, v, found := strings.Cut(pair, "=")
		if found {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	fields := strings.Fields(line[closing+1:])
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, value, err == nil
}
