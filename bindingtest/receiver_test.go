package bindingtest

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// receiverSpec has a field of each kind bindingChanges walks.
type receiverSpec struct {
	URL     string            `json:"url"`
	Hosts   []string          `json:"hosts,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Limit   resource.Quantity `json:"limit"`
	Port    *int32            `json:"port,omitempty"`
	Index   int               `json:"-"`
	visited bool
}

type receiver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              receiverSpec `json:"spec"`
}

// TestBindingChanges: the fields a call changed, by their JSON name (Go's
// where the JSON has none), compared as the API server's types compare.
func TestBindingChanges(t *testing.T) {
	base := func() *receiver {
		return &receiver{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: receiverSpec{URL: "http://proxy ", Hosts: []string{"a"}, Limit: resource.MustParse("1Gi")}}
	}
	port := int32(8080)
	for _, tc := range []struct {
		name   string
		change func(*receiver)
		want   []string
	}{
		{"nothing", func(*receiver) {}, nil},
		{"a Quantity's cached text", func(r *receiver) { _ = r.Spec.Limit.String() }, nil},
		{"a nil list made empty", func(r *receiver) { r.Spec.Labels = map[string]string{} }, nil},
		{"a trimmed URL", func(r *receiver) { r.Spec.URL = "http://proxy" }, []string{`spec.url: "http://proxy " before, "http://proxy" after`}},
		{"an appended host", func(r *receiver) { r.Spec.Hosts = append(r.Spec.Hosts, "b") }, []string{`spec.hosts: ["a"] before, ["a" "b"] after`}},
		{"a label added", func(r *receiver) { r.Spec.Labels = map[string]string{"x": "y"} }, []string{`spec.labels[x]: none before, "y" after`}},
		{"a pointer set", func(r *receiver) { r.Spec.Port = &port }, []string{"spec.port: nil before, 8080 after"}},
		{"a field the JSON does not have", func(r *receiver) { r.Spec.Index = 3 }, []string{"spec.Index: 0 before, 3 after"}},
		{"an unexported field", func(r *receiver) { r.Spec.visited = true }, []string{"spec.visited: false before, true after"}},
		{"the metadata", func(r *receiver) { r.Annotations = map[string]string{"seen": "1"} }, []string{`metadata.annotations[seen]: none before, "1" after`}},
		{"a Quantity", func(r *receiver) { r.Spec.Limit = resource.MustParse("2Gi") }, []string{"spec.limit: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := base(), base()
			tc.change(after)
			got := bindingChanges(before, after)
			if tc.name == "a Quantity" {
				if len(got) != 1 || !strings.HasPrefix(got[0], tc.want[0]) {
					t.Errorf("bindingChanges = %q, want one change of %s", got, tc.want[0])
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("bindingChanges (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClockStampCaughtInEveryRun: a Do that writes the time to the
// second fails the contract check every time it runs, not when two calls
// happen to straddle a second (2 runs in 38 before Do ran again later).
func TestClockStampCaughtInEveryRun(t *testing.T) {
	const runs = 8
	var wg sync.WaitGroup
	failures := make([][]string, runs)
	for i := range runs {
		wg.Go(func() {
			b := &testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, do: stampTime, undo: removeStamp}
			failures[i] = contractFailures(t, b, ContractOptions{})
		})
	}
	wg.Wait()
	for i, got := range failures {
		if len(got) != 1 || !strings.Contains(got[0], "which rolls its pods") {
			t.Errorf("run %d: %d failures, want the one of a Do that reads the clock:\n%s", i, len(got), strings.Join(got, "\n----\n"))
		}
	}
}
