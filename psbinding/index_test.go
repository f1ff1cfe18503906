package psbinding

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/tracker"
)

// testBinding is the least a Binding needs to be indexed.
type testBinding struct {
	namespace, name string
	subject         tracker.Reference
	version         string // its resourceVersion; "" for none
}

var subjectOfTest = indexing[testBinding]{
	identity: func(b testBinding) (string, string, string) { return b.namespace, b.name, b.version },
	subject:  func(b testBinding) tracker.Reference { return b.subject },
}

func names(bs []testBinding) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.namespace + "/" + b.name
	}
	return out
}

func byName(ns, name, subject string) testBinding {
	return testBinding{namespace: ns, name: name, subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: subject}}
}

func bySelector(ns, name string, sel *metav1.LabelSelector) testBinding {
	return testBinding{namespace: ns, name: name, subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Selector: sel}}
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func TestIndexLookup(t *testing.T) {
	bindings := []testBinding{
		byName("ns", "exact-web", "web"),
		bySelector("ns", "sel-app-web", matchLabels("app", "web")),
		bySelector("ns", "sel-app-web-tier", matchLabels("app", "web", "tier", "front")),
		bySelector("ns", "sel-in", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
		}}),
		bySelector("ns", "sel-notin", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}},
		}}),
		bySelector("ns", "sel-everything", &metav1.LabelSelector{}),
		byName("other", "exact-web-other-ns", "web"),
		{namespace: "ns", name: "a-job-binding", subject: tracker.Reference{APIVersion: "batch/v1", Kind: "Job", Namespace: "ns", Name: "web"}},
	}
	ix, errs := newIndex(bindings, subjectOfTest)
	if len(errs) > 0 {
		t.Fatalf("newIndex: %v", errs)
	}

	tests := []struct {
		name            string
		group, kind, ns string
		objName         string
		labels          map[string]string
		want            []string
	}{{
		name: "exact and selectors, sorted by binding name", group: "apps", kind: "Deployment", ns: "ns",
		objName: "web", labels: map[string]string{"app": "web", "tier": "front"},
		want: []string{"ns/exact-web", "ns/sel-app-web", "ns/sel-app-web-tier", "ns/sel-everything", "ns/sel-in", "ns/sel-notin"},
	}, {
		name: "In matches its second value", group: "apps", kind: "Deployment", ns: "ns",
		objName: "api", labels: map[string]string{"app": "api"},
		want: []string{"ns/sel-everything", "ns/sel-in", "ns/sel-notin"},
	}, {
		name: "NotIn excludes, empty selector still matches", group: "apps", kind: "Deployment", ns: "ns",
		objName: "db", labels: map[string]string{"app": "db"},
		want: []string{"ns/sel-everything"},
	}, {
		name: "generated name: selectors only", group: "apps", kind: "Deployment", ns: "ns",
		objName: "", labels: map[string]string{"app": "web"},
		want: []string{"ns/sel-app-web", "ns/sel-everything", "ns/sel-in", "ns/sel-notin"},
	}, {
		name: "other kind", group: "batch", kind: "Job", ns: "ns", objName: "web",
		want: []string{"ns/a-job-binding"},
	}, {
		name: "same kind name in another group does not match", group: "extensions", kind: "Deployment", ns: "ns",
		objName: "web", labels: map[string]string{"app": "web"},
	}, {
		name: "namespace without bindings", group: "apps", kind: "Deployment", ns: "empty",
		objName: "web", labels: map[string]string{"app": "web"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ix.lookup(tc.group, tc.kind, tc.ns, tc.objName, tc.labels)
			if diff := cmp.Diff(tc.want, names(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("lookup (-want +got):\n%s", diff)
			}
			if inScope := ix.inScope(tc.group, tc.kind, tc.ns); len(tc.want) > 0 && !inScope {
				t.Errorf("inScope = false for a scope with matches")
			}
		})
	}
}

// TestIndexOrderIndependentOfListOrder is what keeps the webhook and the
// reconciler from fighting: the same Bindings in any order apply in one order.
func TestIndexOrderIndependentOfListOrder(t *testing.T) {
	var bindings []testBinding
	for i := range 20 {
		bindings = append(bindings, bySelector("ns", fmt.Sprintf("b%02d", i), matchLabels("app", "web")))
		bindings = append(bindings, byName("ns", fmt.Sprintf("e%02d", i), "web"))
	}
	ix, _ := newIndex(bindings, subjectOfTest)
	want := names(ix.lookup("apps", "Deployment", "ns", "web", map[string]string{"app": "web"}))
	for seed := range uint64(10) {
		shuffled := append([]testBinding(nil), bindings...)
		rand.New(rand.NewPCG(seed, seed)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		ix, _ := newIndex(shuffled, subjectOfTest)
		got := names(ix.lookup("apps", "Deployment", "ns", "web", map[string]string{"app": "web"}))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: order depends on list order (-want +got):\n%s", seed, diff)
		}
	}
}

func TestIndexReportsInvalidBindings(t *testing.T) {
	bindings := []testBinding{
		byName("ns", "good", "web"),
		{namespace: "ns", name: "no-kind", subject: tracker.Reference{APIVersion: "apps/v1", Namespace: "ns", Name: "web"}},
		bySelector("ns", "bad-selector", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Sometimes"},
		}}),
		// Filed under "other", it would apply in a namespace it may not
		// touch.
		{namespace: "ns", name: "cross-namespace-name", subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "web"}},
		{namespace: "ns", name: "cross-namespace-selector", subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Selector: matchLabels("app", "web")}},
		{namespace: "", name: "cluster-scoped", subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "web"}},
	}
	ix, errs := newIndex(bindings, subjectOfTest)
	if len(errs) != 5 {
		t.Errorf("got %d errors, want 5: %v", len(errs), errs)
	}
	var nsErrs int
	for _, err := range errs {
		if _, ok := errors.AsType[*NamespaceError](err); ok {
			nsErrs++
		}
	}
	if nsErrs != 3 {
		t.Errorf("got %d *NamespaceError, want 3: %v", nsErrs, errs)
	}
	if got := ix.lookup("apps", "Deployment", "other", "web", map[string]string{"app": "web"}); len(got) != 0 {
		t.Errorf("cross-namespace bindings applied in namespace other: %v", names(got))
	}
	if diff := cmp.Diff([]string{"ns/good"}, names(ix.lookup("apps", "Deployment", "ns", "web", nil))); diff != "" {
		t.Errorf("valid binding not indexed (-want +got):\n%s", diff)
	}
}

func BenchmarkIndexLookup(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		var bindings []testBinding
		for i := range n {
			bindings = append(bindings, bySelector("ns", fmt.Sprintf("b%05d", i), matchLabels("app", fmt.Sprintf("app-%d", i))))
		}
		ix, _ := newIndex(bindings, subjectOfTest)
		objLabels := map[string]string{"app": "app-7", "tier": "front", "team": "payments"}
		b.Run(fmt.Sprintf("selector-match/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if got := ix.lookup("apps", "Deployment", "ns", "web", objLabels); len(got) != 1 {
					b.Fatalf("got %d matches", len(got))
				}
			}
		})
		miss := map[string]string{"app": "nothing", "tier": "front"}
		b.Run(fmt.Sprintf("selector-miss/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if got := ix.lookup("apps", "Deployment", "ns", "web", miss); len(got) != 0 {
					b.Fatalf("got %d matches", len(got))
				}
			}
		})
	}
}

// versioned gives each Binding the resourceVersion v.
func versioned(bindings []testBinding, v string) []testBinding {
	out := slices.Clone(bindings)
	for i := range out {
		out[i].version = v
	}
	return out
}

// TestIndexRebuild checks that an index rebuilt from the previous one
// answers as one built afresh, whatever changed between the two lists, and
// that it reuses a scope whose Bindings did not change.
func TestIndexRebuild(t *testing.T) {
	base := versioned([]testBinding{
		bySelector("a", "sel", matchLabels("app", "web")),
		byName("a", "exact", "web"),
		bySelector("b", "sel", matchLabels("app", "web")),
		bySelector("c", "sel", matchLabels("app", "web")),
	}, "1")
	changed := func(i int, f func(*testBinding)) []testBinding {
		out := slices.Clone(base)
		f(&out[i])
		return out
	}
	tests := []struct {
		name string
		next []testBinding
		// kept are the namespaces whose scope must be the previous one's.
		kept []string
	}{
		{name: "nothing changed", next: base, kept: []string{"a", "b", "c"}},
		{name: "selector changed with its version", next: changed(2, func(b *testBinding) {
			b.subject.Selector, b.version = matchLabels("app", "api"), "2"
		}), kept: []string{"a", "c"}},
		{name: "selector changed, no version", next: changed(2, func(b *testBinding) {
			b.subject.Selector, b.version = matchLabels("app", "api"), ""
		}), kept: []string{"a", "c"}},
		{name: "named subject renamed", next: changed(1, func(b *testBinding) {
			b.subject.Name, b.version = "api", "2"
		}), kept: []string{"b", "c"}},
		{name: "Binding deleted", next: slices.Delete(slices.Clone(base), 3, 4), kept: []string{"a", "b"}},
		{name: "Binding added to a scope", next: append(slices.Clone(base), versioned([]testBinding{bySelector("b", "more", matchLabels("tier", "x"))}, "3")...), kept: []string{"a", "c"}},
		{name: "Binding turned invalid", next: changed(0, func(b *testBinding) {
			b.subject.Namespace, b.version = "elsewhere", "2"
		}), kept: []string{"b", "c"}},
		{name: "list reordered", next: []testBinding{base[3], base[1], base[2], base[0]}, kept: []string{"a", "b", "c"}},
	}
	probes := []struct {
		ns, name string
		labels   map[string]string
	}{
		{"a", "web", map[string]string{"app": "web"}},
		{"a", "api", map[string]string{"app": "api"}},
		{"b", "web", map[string]string{"app": "web"}},
		{"b", "x", map[string]string{"app": "api", "tier": "x"}},
		{"c", "web", map[string]string{"app": "web"}},
		{"elsewhere", "web", map[string]string{"app": "web"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev, _ := newIndex(base, subjectOfTest)
			got, gotErrs := prev.rebuild(tc.next, subjectOfTest)
			want, wantErrs := newIndex(tc.next, subjectOfTest)
			if diff := cmp.Diff(fmt.Sprint(wantErrs), fmt.Sprint(gotErrs)); diff != "" {
				t.Errorf("errors (-fresh +rebuilt):\n%s", diff)
			}
			if diff := cmp.Diff(names(want.filed), names(got.filed)); diff != "" {
				t.Errorf("filed (-fresh +rebuilt):\n%s", diff)
			}
			for _, p := range probes {
				w := names(want.lookup("apps", "Deployment", p.ns, p.name, p.labels))
				g := names(got.lookup("apps", "Deployment", p.ns, p.name, p.labels))
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("lookup %s/%s %v (-fresh +rebuilt):\n%s", p.ns, p.name, p.labels, diff)
				}
			}
			var kept []string
			for scope, sc := range got.scopes {
				if prev.scopes[scope] == sc {
					kept = append(kept, scope.namespace)
				}
			}
			slices.Sort(kept)
			if diff := cmp.Diff(tc.kept, kept, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("scopes reused (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkIndexBuild is the admission index's rebuild, which the
// admission reconciler runs on every change of any Binding: n Bindings,
// each a selector in its own namespace (many small Bindings). fresh builds
// from nothing; one-changed rebuilds from the previous index after one
// Binding's change, as the admission reconciler does.
func BenchmarkIndexBuild(b *testing.B) {
	for _, n := range []int{100, 1000} {
		var bindings []testBinding
		for i := range n {
			ns := fmt.Sprintf("team-%04d", i)
			bindings = append(bindings, bySelector(ns, "b", matchLabels("tier", "backend")))
		}
		bindings = versioned(bindings, "1")
		b.Run(fmt.Sprintf("fresh/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, errs := newIndex(bindings, subjectOfTest); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
		b.Run(fmt.Sprintf("one-changed/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			ix, _ := newIndex(bindings, subjectOfTest)
			next := slices.Clone(bindings)
			v := 1
			for b.Loop() {
				v++
				next[v%n].version = strconv.Itoa(v)
				var errs []error
				if ix, errs = ix.rebuild(next, subjectOfTest); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
