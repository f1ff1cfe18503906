package duck

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	ghBy    = BoundBy{Resource: schema.GroupResource{Group: "bindings.bindkit.dev", Resource: "githubbindings"}, Name: "gh"}
	coreBy  = BoundBy{Resource: schema.GroupResource{Resource: "things"}, Name: "gh"}
	otherBy = BoundBy{Resource: ghBy.Resource, Name: "other"}
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
	} {
		for _, by := range []BoundBy{ghBy, coreBy, otherBy, {Resource: ghBy.Resource}} {
			t.Run(fmt.Sprintf("%s/%s", value, by), func(t *testing.T) {
				annotations := map[string]string{BoundAnnotation: value}
				wantGen, wantOK := BoundOf(annotations)[by]
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
		wantGen, wantOK := BoundOf(annotations)[by]
		gen, ok := BoundGeneration(annotations, by)
		if gen != wantGen || ok != wantOK {
			t.Errorf("value %q, by %+v: BoundGeneration = %d, %v; BoundOf says %d, %v", value, by, gen, ok, wantGen, wantOK)
		}
	})
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
