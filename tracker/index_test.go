package tracker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// placement says where a selector entry was put in its selectorSet.
type placement struct {
	Selector string
	Pair     labelPair // zero for the fallback
	Fallback bool
}

func placements(tr Interface, ref Reference) []placement {
	in := internals(tr)
	in.mu.RLock()
	defer in.mu.RUnlock()
	gvk, _ := ref.GroupVersionKind()
	set := in.selectors[scopeKey{gk: gvk.GroupKind(), namespace: ref.Namespace}]
	if set == nil {
		return nil
	}
	var out []placement
	for pair, bucket := range set.byPair {
		for key := range bucket {
			out = append(out, placement{Selector: key, Pair: pair})
		}
	}
	for key := range set.fallback {
		out = append(out, placement{Selector: key, Fallback: true})
	}
	slices.SortFunc(out, func(a, b placement) int { return strings.Compare(a.Selector, b.Selector) })
	return out
}

func TestSelectorIndexPlacement(t *testing.T) {
	exprs := func(reqs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: reqs}
	}
	tests := []struct {
		name      string
		selectors []*metav1.LabelSelector // tracked in this order
		want      []placement
	}{{
		name:      "matchLabels is indexed",
		selectors: []*metav1.LabelSelector{matchLabels("app", "web")},
		want:      []placement{{Selector: "app=web", Pair: labelPair{"app", "web"}}},
	}, {
		name:      "In with one value is indexed",
		selectors: []*metav1.LabelSelector{exprs(expr("app", metav1.LabelSelectorOpIn, "web"))},
		want:      []placement{{Selector: "app in (web)", Pair: labelPair{"app", "web"}}},
	}, {
		name: "only NotIn, Exists, DoesNotExist, multi-valued In: fallback",
		selectors: []*metav1.LabelSelector{
			exprs(expr("app", metav1.LabelSelectorOpNotIn, "web")),
			exprs(expr("app", metav1.LabelSelectorOpExists)),
			exprs(expr("app", metav1.LabelSelectorOpDoesNotExist)),
			exprs(expr("app", metav1.LabelSelectorOpIn, "a", "b")),
			{},
		},
		want: []placement{
			{Selector: "", Fallback: true},
			{Selector: "!app", Fallback: true},
			{Selector: "app", Fallback: true},
			{Selector: "app in (a,b)", Fallback: true},
			{Selector: "app notin (web)", Fallback: true},
		},
	}, {
		name:      "Exists plus one equality is indexed by the equality",
		selectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "front"}, MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpExists)}}},
		want:      []placement{{Selector: "app,tier=front", Pair: labelPair{"tier", "front"}}},
	}, {
		name: "a shared pair yields to a rarer one",
		selectors: []*metav1.LabelSelector{
			matchLabels("a-team", "pay", "name", "one"),
			matchLabels("a-team", "pay", "name", "two"),
			matchLabels("a-team", "pay", "name", "three"),
		},
		want: []placement{
			{Selector: "a-team=pay,name=one", Pair: labelPair{"a-team", "pay"}}, // tie: first key
			{Selector: "a-team=pay,name=three", Pair: labelPair{"name", "three"}},
			{Selector: "a-team=pay,name=two", Pair: labelPair{"name", "two"}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(nil, time.Hour)
			var ref Reference
			for i, sel := range tc.selectors {
				ref = bySelector("v1", "Pod", "default", sel)
				mustTrack(t, tr, ref, observer(envBindingGK, "default", fmt.Sprint("b", i)))
			}
			if diff := cmp.Diff(tc.want, placements(tr, ref), cmp.AllowUnexported(labelPair{})); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFallbackSelectorsMatch checks the fallback path end to end: selectors
// that cannot be indexed still match, and indexed ones are not also visited
// through the fallback.
func TestFallbackSelectorsMatch(t *testing.T) {
	tr := New(nil, time.Hour)
	notIn := observer(envBindingGK, "default", "not-in")
	exists := observer(envBindingGK, "default", "exists")
	absent := observer(envBindingGK, "default", "absent")
	eq := observer(envBindingGK, "default", "eq")
	mustTrack(t, tr, bySelector("v1", "Pod", "default", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		expr("env", metav1.LabelSelectorOpNotIn, "prod", "staging"),
	}}), notIn)
	mustTrack(t, tr, bySelector("v1", "Pod", "default", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		expr("env", metav1.LabelSelectorOpExists),
	}}), exists)
	mustTrack(t, tr, bySelector("v1", "Pod", "default", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		expr("env", metav1.LabelSelectorOpDoesNotExist),
	}}), absent)
	mustTrack(t, tr, bySelector("v1", "Pod", "default", matchLabels("env", "dev")), eq)

	tests := []struct {
		labels map[string]string
		want   []Observer
	}{
		{labels: nil, want: []Observer{absent, notIn}},
		{labels: map[string]string{"env": "prod"}, want: []Observer{exists}},
		{labels: map[string]string{"env": "dev"}, want: []Observer{eq, exists, notIn}},
	}
	for _, tc := range tests {
		got, err := tr.GetObserversKind(podGK, deployment("default", "p", tc.labels))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("labels %v (-want +got):\n%s", tc.labels, diff)
		}
	}
}
