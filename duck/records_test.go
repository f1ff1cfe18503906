package duck

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseChanges(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		value   string
		want    Changes
		wantErr bool
	}{
		{value: "", want: Changes{}},
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:3:2:1700000000", want: Changes{ghU1: {Generation: 3, Wave: 2, Since: at}}},
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:3:2:1700000000, things/gh:1:1:1700000000",
			want: Changes{ghU1: {Generation: 3, Wave: 2, Since: at}, coreBy: {Generation: 1, Wave: 1, Since: at}}},
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:3:2", want: Changes{}, wantErr: true},
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:3:-1:1700000000", want: Changes{}, wantErr: true},
		{value: "githubbindings.bindings.bindkit.dev/gh@u1:x:1:1700000000,things/gh:1:1:1700000000",
			want: Changes{coreBy: {Generation: 1, Wave: 1, Since: at}}, wantErr: true},
		{value: ":::", want: Changes{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			got, err := ParseChanges(tc.value)
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err == nil {
				again, err := ParseChanges(got.String())
				if err != nil || !cmp.Equal(got, again) {
					t.Errorf("String %q does not read back: %v, %v", got.String(), again, err)
				}
			}
		})
	}
}

// FuzzParseChanges reads any value (anyone who may edit a subject writes
// it): no panic, and what it reads formats to a value that reads back the
// same.
func FuzzParseChanges(f *testing.F) {
	f.Add("githubbindings.bindings.bindkit.dev/gh@u1:3:2:1700000000,things/gh:1:1:1700000000")
	f.Add("a/b@:1:1:1")
	f.Add("::::,,,")
	f.Fuzz(func(t *testing.T, value string) {
		got, _ := ParseChanges(value)
		again, err := ParseChanges(got.String())
		if err != nil {
			t.Fatalf("%q: String %q does not read: %v", value, got.String(), err)
		}
		if !cmp.Equal(got, again) {
			t.Fatalf("%q: read %v, then %v", value, got, again)
		}
	})
}

func TestSetChange(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		name   string
		before map[string]string
		by     BoundBy
		ch     *Change
		want   map[string]string
	}{
		{"first", nil, ghU1, &Change{Generation: 2, Wave: 1, Since: at},
			map[string]string{RolloutAnnotation: "githubbindings.bindings.bindkit.dev/gh@u1:2:1:1700000000"}},
		{"replaces its own and a predecessor's, keeps another Binding's",
			map[string]string{RolloutAnnotation: "githubbindings.bindings.bindkit.dev/gh@u2:1:1:1,githubbindings.bindings.bindkit.dev/other:5:2:1"},
			ghU1, &Change{Generation: 2, Wave: 3, Since: at},
			map[string]string{RolloutAnnotation: "githubbindings.bindings.bindkit.dev/gh@u1:2:3:1700000000,githubbindings.bindings.bindkit.dev/other:5:2:1"}},
		{"remove: only its own",
			map[string]string{RolloutAnnotation: "githubbindings.bindings.bindkit.dev/gh@u2:1:1:1,githubbindings.bindings.bindkit.dev/gh@u1:2:1:1"},
			ghU1, nil,
			map[string]string{RolloutAnnotation: "githubbindings.bindings.bindkit.dev/gh@u2:1:1:1"}},
		{"remove the last", map[string]string{RolloutAnnotation: "githubbindings.bindings.bindkit.dev/gh@u1:2:1:1", "x": "y"},
			ghU1, nil, map[string]string{"x": "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SetChange(tc.before, tc.by, tc.ch)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetRollbackAndFind(t *testing.T) {
	rb := &Rollback{Patch: json.RawMessage(`[{"op":"remove","path":"/spec/template/spec/volumes/1"}]`), Bound: 2}
	ann, err := SetRollback(nil, ghU1, 3, rb)
	if err != nil {
		t.Fatal(err)
	}
	ann, err = SetRollback(ann, otherBy, 1, &Rollback{Patch: json.RawMessage(`[]`)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := RollbacksOf(ann)
	if err != nil {
		t.Fatal(err)
	}
	key, got, ok := r.Find(ghU1)
	if !ok || key != "githubbindings.bindings.bindkit.dev/gh@u1:3" || string(got.Patch) != string(rb.Patch) || got.Bound != 2 {
		t.Errorf("Find(gh@u1) = %q, %+v, %v", key, got, ok)
	}
	if _, _, ok := r.Find(ghU2); ok {
		t.Error("a re-created Binding of the same name finds its predecessor's rollback")
	}
	// A new change by the same Binding replaces its entry.
	if ann, err = SetRollback(ann, ghU1, 4, &Rollback{Patch: json.RawMessage(`[{"op":"test","path":"/a","value":1}]`)}); err != nil {
		t.Fatal(err)
	}
	r, _ = RollbacksOf(ann)
	if key, _, _ := r.Find(ghU1); key != "githubbindings.bindings.bindkit.dev/gh@u1:4" || len(r) != 2 {
		t.Errorf("after a second change: %v", r)
	}
	// An unreadable value (an older bindkit's) is replaced.
	old := map[string]string{RollbackAnnotation: "githubbindings.bindings.bindkit.dev/gh:3 [{}]"}
	if _, err := RollbacksOf(old); err == nil {
		t.Error("an unreadable rollback annotation reads without an error")
	}
	if old, err = SetRollback(old, ghU1, 3, rb); err != nil {
		t.Fatal(err)
	}
	if r, err := RollbacksOf(old); err != nil || len(r) != 1 {
		t.Errorf("replaced: %v, %v", r, err)
	}
}

func TestForget(t *testing.T) {
	ann := map[string]string{
		BoundAnnotation:    "githubbindings.bindings.bindkit.dev/gh@u1:3,things/gh:1",
		RolloutAnnotation:  "githubbindings.bindings.bindkit.dev/gh@u1:3:1:1,things/gh:1:1:1",
		HeldAnnotation:     "githubbindings.bindings.bindkit.dev/gh@u1:2",
		RollbackAnnotation: `{"githubbindings.bindings.bindkit.dev/gh@u1:3":{"patch":[]},"things/gh:1":{"patch":[]}}`,
		"other":            "kept",
	}
	if !Names(ann, ghU1) || Names(ann, ghU2) {
		t.Errorf("Names: gh@u1 %v (want true), gh@u2 %v (want false)", Names(ann, ghU1), Names(ann, ghU2))
	}
	got := Forget(ann, ghU1)
	want := map[string]string{
		BoundAnnotation:    "things/gh:1",
		RolloutAnnotation:  "things/gh:1:1:1",
		RollbackAnnotation: `{"things/gh:1":{"patch":[]}}`,
		"other":            "kept",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if Names(got, ghU1) {
		t.Error("a forgotten Binding is still named")
	}
}
