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
