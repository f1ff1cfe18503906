package duck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	ghBy    = BoundBy{Resource: schema.GroupResource{Group: "bindings.bindkit.dev", Resource: "githubbindings"}, Name: "gh"}
	coreBy  = BoundBy{Resource: schema.GroupResource{Resource: "things"}, Name: "gh"}
	otherBy = BoundBy{Resource: ghBy.Resource, Name: "other"}
	ghU1    = BoundBy{Resource: ghBy.Resource, Name: "gh", UID: "u1"}
	ghU2    = BoundBy{Resource: ghBy.Resource, Name: "gh", UID: "u2"}
)

func TestParseBound(t *testing.T) {
	tests := []struct {
		value   string
		want    Bound
		wantErr bool
	}{
		{value: "", want: Bound{}},
		{value: "githubbindings.bindings.bindkit.dev/gh:3", want: Bound{ghBy: 3}},
		{value: "githubbindings.bindings.bindkit.dev/gh:3, githubbindings.bindings.bindkit.dev/other:0", want: Bound{ghBy: 3, otherBy: 0}},
		{value: "things/gh:1", want: Bound{coreBy: 1}},
		// Duplicates: the last entry counts.
		{value: "githubbindings.bindings.bindkit.dev/gh:3,githubbindings.bindings.bindkit.dev/gh:5", want: Bound{ghBy: 5}},
		// Unreadable entries are reported and skipped; the rest is kept.
		{value: "githubbindings.bindings.bindkit.dev/gh:x,githubbindings.bindings.bindkit.dev/other:2", want: Bound{otherBy: 2}, wantErr: true},
		{value: "githubbindings.bindings.bindkit.dev/gh:-1", want: Bound{}, wantErr: true},
		{value: "githubbindings.bindings.bindkit.dev/:1", want: Bound{}, wantErr: true},
		{value: "/gh:1", want: Bound{}, wantErr: true},
		{value: "gh", want: Bound{}, wantErr: true},
		// With UIDs: a predecessor of the same name is another Binding.
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:3", want: Bound{ghU1: 3}},
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:3,githubbindings.bindings.bindkit.dev/gh@u2:1", want: Bound{ghU1: 3, ghU2: 1}},
		{value: "githubbindings.bindings.bindkit.dev/gh@:3", want: Bound{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			got, err := ParseBound(tc.value)
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestBoundGeneration checks BoundGeneration against the record BoundOf
// builds, for each Binding of each value.
func TestBoundGeneration(t *testing.T) {
	for _, value := range []string{
		"",
		"githubbindings.bindings.bindkit.dev/gh:3",
		" githubbindings.bindings.bindkit.dev/gh:3 , things/gh:7",
		"githubbindings.bindings.bindkit.dev/gh:3,githubbindings.bindings.bindkit.dev/gh:5",
		"githubbindings.bindings.bindkit.dev/gh:5,githubbindings.bindings.bindkit.dev/gh:x",
		"githubbindings.bindings.bindkit.dev/gh:-2",
		"githubbindings.bindings.bindkit.dev./gh:4",
		"githubbindings/gh:1",
		"githubbindings.bindings.bindkit.dev/gh@u1:3",
		"githubbindings.bindings.bindkit.dev/gh@u2:3",
		"githubbindings.bindings.bindkit.dev/gh@u1:2,githubbindings.bindings.bindkit.dev/gh:4",
	} {
		for _, by := range []BoundBy{ghBy, coreBy, otherBy, {Resource: ghBy.Resource}, ghU1, ghU2} {
			t.Run(fmt.Sprintf("%s/%s", value, by), func(t *testing.T) {
				annotations := map[string]string{BoundAnnotation: value}
				wantGen, wantOK := lastMatch(value, by)
				gen, ok := BoundGeneration(annotations, by)
				if gen != wantGen || ok != wantOK {
					t.Errorf("BoundGeneration = %d, %v; BoundOf says %d, %v", gen, ok, wantGen, wantOK)
				}
			})
		}
	}
}

// FuzzBoundGeneration checks that BoundGeneration reads any annotation
// value, which anyone who may edit a subject writes, as BoundOf does.
func FuzzBoundGeneration(f *testing.F) {
	f.Add("githubbindings.bindings.bindkit.dev/gh:3,things/gh:1", "bindings.bindkit.dev", "githubbindings", "gh")
	f.Add("githubbindings.bindings.bindkit.dev/gh:3,githubbindings.bindings.bindkit.dev/gh:x", "bindings.bindkit.dev", "githubbindings", "gh")
	f.Add("things/gh:1", "", "things", "gh")
	f.Fuzz(func(t *testing.T, value, group, resource, name string) {
		annotations := map[string]string{BoundAnnotation: value}
		by := BoundBy{Resource: schema.GroupResource{Group: group, Resource: resource}, Name: name}
		wantGen, wantOK := lastMatch(value, by)
		gen, ok := BoundGeneration(annotations, by)
		if gen != wantGen || ok != wantOK {
			t.Errorf("value %q, by %+v: BoundGeneration = %d, %v; BoundOf says %d, %v", value, by, gen, ok, wantGen, wantOK)
		}
	})
}

// lastMatch is what BoundGeneration promises, spelled out: the last
// readable entry of value that Matches by.
func lastMatch(value string, by BoundBy) (gen int64, ok bool) {
	for _, entry := range strings.Split(value, ",") {
		if e, g, valid := ParseEntry(entry); valid && e.Matches(by) {
			gen, ok = g, true
		}
	}
	return gen, ok
}

func TestBoundByMatches(t *testing.T) {
	tests := []struct {
		a, b BoundBy
		want bool
	}{
		{ghBy, ghBy, true},
		{ghU1, ghU1, true},
		{ghU1, ghU2, false},
		{ghBy, ghU1, true}, // an entry from before UIDs: any Binding of the name
		{ghU2, ghBy, true},
		{ghU1, otherBy, false},
		{ghBy, coreBy, false},
	}
	for _, tc := range tests {
		if got := tc.a.Matches(tc.b); got != tc.want {
			t.Errorf("%v.Matches(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestMarkBoundReplacesPredecessor(t *testing.T) {
	tests := []struct {
		name   string
		before string
		mark   func(*WithPod)
		want   string
	}{
		{"bind over a predecessor", "githubbindings.bindings.bindkit.dev/gh@u1:3,things/gh:1",
			func(wp *WithPod) { MarkBound(wp, ghU2, 1) }, "githubbindings.bindings.bindkit.dev/gh@u2:1,things/gh:1"},
		{"bind over a legacy entry", "githubbindings.bindings.bindkit.dev/gh:3",
			func(wp *WithPod) { MarkBound(wp, ghU1, 4) }, "githubbindings.bindings.bindkit.dev/gh@u1:4"},
		{"unbind leaves a predecessor", "githubbindings.bindings.bindkit.dev/gh@u1:3",
			func(wp *WithPod) { MarkUnbound(wp, ghU2) }, "githubbindings.bindings.bindkit.dev/gh@u1:3"},
		{"unbind a legacy entry", "githubbindings.bindings.bindkit.dev/gh:3,things/gh:1",
			func(wp *WithPod) { MarkUnbound(wp, ghU2) }, "things/gh:1"},
		{"unbind the last", "githubbindings.bindings.bindkit.dev/gh@u1:3",
			func(wp *WithPod) { MarkUnbound(wp, ghU1) }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wp := &WithPod{}
			wp.Annotations = map[string]string{BoundAnnotation: tc.before}
			tc.mark(wp)
			if diff := cmp.Diff(tc.want, wp.Annotations[BoundAnnotation]); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkBoundGeneration(b *testing.B) {
	annotations := map[string]string{BoundAnnotation: "githubbindings.bindings.bindkit.dev/gh:3,things/gh:1"}
	b.Run("BoundOf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := BoundOf(annotations)[ghBy]; !ok {
				b.Fatal("not found")
			}
		}
	})
	b.Run("BoundGeneration", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := BoundGeneration(annotations, ghBy); !ok {
				b.Fatal("not found")
			}
		}
	})
}
