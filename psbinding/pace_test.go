package psbinding

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// TestNotCachedYet: a subject this process last reported changing to the
// Binding's generation takes its slot until the cache shows that change;
// the cache showing an earlier change of the same Binding (the binding a
// paced deletion takes back, the last generation that rolled out) is the
// cache lagging, not the change arriving.
func TestNotCachedYet(t *testing.T) {
	since := time.Unix(1700000000, 0).UTC()
	b := &envBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "uid-b", Generation: 3}}
	by := duck.BoundBy{Resource: envBindingsGVR.GroupResource(), Name: "b", UID: "uid-b"}
	live := testDeployment("ns", "a", nil)
	live.Annotations = duck.SetChange(nil, by, &duck.Change{Generation: 3, Wave: 2, Since: since})
	mine := &duck.RolloutStatus{Generation: 3, Wave: 2, Changing: []duck.ChangingSubject{{Name: "a", Generation: 3}}}
	tests := []struct {
		name   string
		mine   *duck.RolloutStatus
		cached []changedSubject
		want   []string
	}{
		{name: "the cache does not show the subject changed at all", mine: mine, want: []string{"a"}},
		{name: "the cache shows an earlier generation's change", mine: mine,
			cached: []changedSubject{{name: "a", change: duck.Change{Generation: 2, Wave: 1}}}, want: []string{"a"}},
		{name: "the cache shows the change", mine: mine,
			cached: []changedSubject{{name: "a", change: duck.Change{Generation: 3, Wave: 2}}}},
		{name: "no report of this process"},
		{name: "a report of an earlier generation", mine: &duck.RolloutStatus{Generation: 2, Changing: []duck.ChangingSubject{{Name: "a", Generation: 2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newReconcilerFixture(t, live)
			s := &subject{ref: tracker.Reference{Namespace: "ns"}, gvr: deploymentsGVR}
			got, err := f.r.notCachedYet(t.Context(), b, s, tt.mine, tt.cached)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.name)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("subjects not cached yet (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQuietFor: how long a Binding's generation waits before it reaches
// subjects, by what this process saw of the Binding before and when.
func TestQuietFor(t *testing.T) {
	const quiet = 2 * time.Second
	start := time.Unix(1700000000, 0).UTC()
	type seen struct {
		generation int64
		after      time.Duration // since start
	}
	tests := []struct {
		name  string
		paced bool
		seen  []seen // the calls before the last, in order
		last  seen
		want  time.Duration
	}{
		{name: "a new Binding", last: seen{1, 0}},
		{name: "a new Binding, paced", paced: true, last: seen{1, 0}},
		{name: "a Binding this process has not seen, at a later generation", last: seen{7, 0}},
		{name: "the same, paced", paced: true, last: seen{7, 0}, want: quiet},
		{name: "the first edit after a quiet spell", seen: []seen{{1, 0}}, last: seen{2, 5 * time.Second}},
		{name: "the first edit after a quiet spell, paced", paced: true, seen: []seen{{1, 0}}, last: seen{2, 5 * time.Second}, want: quiet},
		{name: "an edit soon after the one before", seen: []seen{{1, 0}, {2, 5 * time.Second}},
			last: seen{3, 5*time.Second + 300*time.Millisecond}, want: quiet},
		{name: "the same generation again, later", seen: []seen{{1, 0}, {2, 5 * time.Second}, {3, 5*time.Second + 300*time.Millisecond}},
			last: seen{3, 6 * time.Second}, want: quiet - 700*time.Millisecond},
		// A busy process saw generation 3, then nothing for 3 s, then
		// generation 9: five edits it never saw came between, perhaps
		// each within quiet of the next.
		{name: "a skipped generation seen long after the last", seen: []seen{{1, 0}, {2, 5 * time.Second}, {3, 5*time.Second + 300*time.Millisecond}},
			last: seen{9, 8*time.Second + 300*time.Millisecond}, want: quiet},
		{name: "the next generation seen long after the last", seen: []seen{{1, 0}, {2, 5 * time.Second}, {3, 5*time.Second + 300*time.Millisecond}},
			last: seen{4, 8*time.Second + 300*time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g generations
			call := func(s seen) time.Duration {
				b := &envBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "uid-b", Generation: s.generation}}
				return g.quietFor(b, quiet, start.Add(s.after), tt.paced)
			}
			for _, s := range tt.seen {
				call(s)
			}
			if got := call(tt.last); got != tt.want {
				t.Errorf("quietFor = %v, want %v", got, tt.want)
			}
		})
	}
}
