package tracker

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const benchRefs = 10_000

// benchObject carries a few labels besides the one that decides the match,
// as real workloads do.
func benchObject(name, key, value string) any {
	return deployment("default", name, map[string]string{
		key: value, "team": "payments", "env": "prod", "version": "v2",
	})
}

// benchTracker tracks benchRefs references in one namespace, reference i
// made by mkRef(i) for its own observer.
func benchTracker(b *testing.B, mkRef func(i int) Reference) Interface {
	b.Helper()
	tr := New(func(Observer) {}, time.Hour)
	for i := range benchRefs {
		mustTrack(b, tr, mkRef(i), observer(envBindingGK, "default", fmt.Sprint("b", i)))
	}
	return tr
}

func BenchmarkLookup(b *testing.B) {
	cases := []struct {
		name      string
		ref       func(i int) Reference
		matchOne  any
		matchNone any
	}{{
		name:      "names",
		ref:       func(i int) Reference { return byName("apps/v1", "Deployment", "default", fmt.Sprint("web-", i)) },
		matchOne:  benchObject("web-5000", "app", "x"),
		matchNone: benchObject("other", "app", "x"),
	}, {
		name: "selectors-indexed",
		ref: func(i int) Reference {
			return bySelector("apps/v1", "Deployment", "default", matchLabels("app", fmt.Sprint("app-", i)))
		},
		matchOne:  benchObject("x", "app", "app-5000"),
		matchNone: benchObject("x", "app", "nope"),
	}, {
		// Every selector shares team=payments; the index must pick the rarer pair.
		name: "selectors-indexed-shared-pair",
		ref: func(i int) Reference {
			return bySelector("apps/v1", "Deployment", "default", matchLabels("app", fmt.Sprint("app-", i), "team", "payments"))
		},
		matchOne:  benchObject("x", "app", "app-5000"),
		matchNone: benchObject("x", "app", "nope"),
	}, {
		// Only Exists requirements: nothing to index, every lookup scans all.
		name: "selectors-fallback",
		ref: func(i int) Reference {
			return bySelector("apps/v1", "Deployment", "default", &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{expr(fmt.Sprint("key-", i), metav1.LabelSelectorOpExists)},
			})
		},
		matchOne:  benchObject("x", "key-5000", ""),
		matchNone: benchObject("x", "nope", ""),
	}}
	for _, c := range cases {
		tr := benchTracker(b, c.ref)
		for _, obj := range []struct {
			name string
			obj  any
			want int
		}{{"match-one", c.matchOne, 1}, {"match-none", c.matchNone, 0}} {
			got, err := tr.GetObserversKind(deploymentGK, obj.obj)
			if err != nil || len(got) != obj.want {
				b.Fatalf("%s/%s: got %d observers, %v; want %d", c.name, obj.name, len(got), err, obj.want)
			}
			b.Run(c.name+"/GetObservers/"+obj.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, _ = tr.GetObserversKind(deploymentGK, obj.obj)
				}
			})
			b.Run(c.name+"/OnChanged/"+obj.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = tr.OnChangedKind(deploymentGK, obj.obj)
				}
			})
		}
	}
}

// BenchmarkLookupParallel shows lookups sharing the read lock.
func BenchmarkLookupParallel(b *testing.B) {
	tr := benchTracker(b, func(i int) Reference {
		return bySelector("apps/v1", "Deployment", "default", matchLabels("app", fmt.Sprint("app-", i)))
	})
	obj := benchObject("x", "app", "app-5000")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = tr.GetObserversKind(deploymentGK, obj)
		}
	})
}

// BenchmarkTrackReference measures renewing an existing selector
// registration, what every reconcile of a Binding does.
func BenchmarkTrackReference(b *testing.B) {
	tr := benchTracker(b, func(i int) Reference {
		return bySelector("apps/v1", "Deployment", "default", matchLabels("app", fmt.Sprint("app-", i)))
	})
	ref := bySelector("apps/v1", "Deployment", "default", matchLabels("app", "app-5000"))
	o := observer(envBindingGK, "default", "b5000")
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.TrackReference(ref, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSweep measures a sweep that finds nothing expired.
func BenchmarkSweep(b *testing.B) {
	tr := benchTracker(b, func(i int) Reference {
		return bySelector("apps/v1", "Deployment", "default", matchLabels("app", fmt.Sprint("app-", i)))
	})
	b.ReportAllocs()
	for b.Loop() {
		if n := tr.Sweep(); n != 0 {
			b.Fatalf("Sweep removed %d", n)
		}
	}
}
