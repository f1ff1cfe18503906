package duck

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The record format across releases (RecordFormat): records written by
// this bindkit are read by v0.5.0 without a write, and the other way
// round; a record of a newer format is left alone. The releases are the
// frozen readers and writers in format_v050_test.go and
// format_pre050_test.go.

// since is when the fixtures' paced changes happened (to the second, as
// recorded).
var since = time.Unix(1_764_000_000, 0).UTC()

// shape is one shape of record: how each release writes a Binding's
// record of that shape and what each reads of it, as a string two
// releases can be compared on ("" when it reads nothing).
type shape struct {
	name, annotation string
	// current, v050: write by's record at generation.
	current func(ann map[string]string, by BoundBy, gen int64) map[string]string
	v050    func(ann map[string]string, by v050BoundBy, gen int64) map[string]string
	// readCurrent, readV050: what each release reads of by's record.
	readCurrent func(ann map[string]string, by BoundBy) string
	readV050    func(ann map[string]string, by v050BoundBy) string
	// newer is by's record at generation in a format 2 this bindkit does
	// not know, as a later bindkit might write it.
	newer func(ann map[string]string, by BoundBy, gen int64) map[string]string
}

func rollbackOfGen(gen int64) *Rollback {
	return &Rollback{Patch: json.RawMessage(fmt.Sprintf(`[{"op":"test","path":"/spec/template/metadata/labels/g","value":"%d"},{"op":"remove","path":"/spec/template/metadata/labels/g"}]`, gen)), Bound: gen - 1}
}

func shapes() []shape {
	return []shape{{
		name: "bound", annotation: BoundAnnotation,
		current: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			wp := &WithPod{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
			MarkBound(wp, by, gen)
			return wp.Annotations
		},
		v050: v050MarkBound,
		readCurrent: func(ann map[string]string, by BoundBy) string {
			if g, ok := BoundGeneration(ann, by); ok {
				return fmt.Sprintf("bound at %d", g)
			}
			return ""
		},
		readV050: func(ann map[string]string, by v050BoundBy) string {
			if g, ok := v050BoundGeneration(ann, by); ok {
				return fmt.Sprintf("bound at %d", g)
			}
			return ""
		},
		newer: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			return appendEntry(ann, BoundAnnotation, fmt.Sprintf("%s:v2;%d;digest=9f86d0", by, gen))
		},
	}, {
		name: "paced", annotation: RolloutAnnotation,
		current: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			return SetChange(ann, by, &Change{Generation: gen, Wave: 2, Since: since})
		},
		v050: func(ann map[string]string, by v050BoundBy, gen int64) map[string]string {
			return v050SetChange(ann, by, &v050Change{Generation: gen, Wave: 2, Since: since})
		},
		readCurrent: func(ann map[string]string, by BoundBy) string {
			if c, ok := ChangesOf(ann).Lookup(by); ok {
				return fmt.Sprintf("changed to %d in wave %d at %d", c.Generation, c.Wave, c.Since.Unix())
			}
			return ""
		},
		readV050: func(ann map[string]string, by v050BoundBy) string {
			if c, ok := v050ChangesOf(ann).Lookup(by); ok {
				return fmt.Sprintf("changed to %d in wave %d at %d", c.Generation, c.Wave, c.Since.Unix())
			}
			return ""
		},
		newer: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			return appendEntry(ann, RolloutAnnotation, fmt.Sprintf("%s:v2;%d;2;%d;surge=1", by, gen, since.Unix()))
		},
	}, {
		name: "held", annotation: HeldAnnotation,
		current: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			h := HeldOf(ann)
			h[by] = gen
			return SetHeld(ann, h)
		},
		v050: func(ann map[string]string, by v050BoundBy, gen int64) map[string]string {
			h := v050HeldOf(ann)
			h[by] = gen
			return v050SetHeld(ann, h)
		},
		readCurrent: func(ann map[string]string, by BoundBy) string {
			if g, ok := HeldOf(ann).Lookup(by); ok {
				return fmt.Sprintf("held from %d", g)
			}
			return ""
		},
		readV050: func(ann map[string]string, by v050BoundBy) string {
			for e, g := range v050HeldOf(ann) {
				if e.Matches(by) {
					return fmt.Sprintf("held from %d", g)
				}
			}
			return ""
		},
		newer: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			return appendEntry(ann, HeldAnnotation, fmt.Sprintf("%s:v2;%d;reason=deadline", by, gen))
		},
	}, {
		name: "rollback", annotation: RollbackAnnotation,
		current: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			ann, err := SetRollback(ann, by, gen, rollbackOfGen(gen))
			if err != nil {
				panic(err)
			}
			return ann
		},
		v050: func(ann map[string]string, by v050BoundBy, gen int64) map[string]string {
			rb := rollbackOfGen(gen)
			return v050SetRollback(ann, by, gen, &v050Rollback{Patch: rb.Patch, Bound: rb.Bound})
		},
		readCurrent: func(ann map[string]string, by BoundBy) string {
			r, _ := RollbacksOf(ann)
			if k, rb, ok := r.Find(by); ok {
				return fmt.Sprintf("%s undone by %s back to %d", k, rb.Patch, rb.Bound)
			}
			return ""
		},
		readV050: func(ann map[string]string, by v050BoundBy) string {
			r, _ := v050RollbacksOf(ann)
			if k, rb, ok := r.Find(by); ok {
				return fmt.Sprintf("%s undone by %s back to %d", k, rb.Patch, rb.Bound)
			}
			return ""
		},
		newer: func(ann map[string]string, by BoundBy, gen int64) map[string]string {
			raw, _ := rawRollbacks(ann[RollbackAnnotation])
			raw[fmt.Sprintf("%s:v2;%d", by, gen)] = json.RawMessage(`{"ops":"gzip:H4sIAAAA","carried":2}`)
			js, _ := json.Marshal(raw)
			if ann == nil {
				ann = map[string]string{}
			}
			ann[RollbackAnnotation] = string(js)
			return ann
		},
	}}
}

func appendEntry(ann map[string]string, key, entry string) map[string]string {
	if ann == nil {
		ann = map[string]string{}
	}
	if ann[key] == "" {
		ann[key] = entry
	} else {
		ann[key] += "," + entry
	}
	return ann
}

// The Bindings of the fixtures: gh, whose records the tests follow, and
// two more on the same subject, one of which writes while gh's records
// are there.
var (
	ghV050    = v050BoundBy(ghU1)
	otherU3   = BoundBy{Resource: ghBy.Resource, Name: "other", UID: "u3"}
	thirdU4   = BoundBy{Resource: coreBy.Resource, Name: "third", UID: "u4"}
	otherV050 = v050BoundBy(otherU3)
	thirdV050 = v050BoundBy(thirdU4)
)

// recordsOf returns the record annotations of ann, for comparisons.
func recordsOf(ann map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{BoundAnnotation, RolloutAnnotation, HeldAnnotation, RollbackAnnotation} {
		if v, ok := ann[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestFormatV050ReadsCurrent: records this bindkit writes, of every
// shape, are read by v0.5.0 as they are read here (a Binding in force
// finds itself in force: no write), survive v0.5.0's writes for another
// Binding unchanged, and go with their Binding under v0.5.0.
func TestFormatV050ReadsCurrent(t *testing.T) {
	for _, s := range shapes() {
		t.Run(s.name, func(t *testing.T) {
			ann := s.current(nil, otherU3, 1)
			ann = s.current(ann, ghU1, 3)
			want := s.readCurrent(ann, ghU1)
			if want == "" {
				t.Fatalf("this bindkit does not read its own %s record: %v", s.name, ann)
			}
			if got := s.readV050(ann, ghV050); got != want {
				t.Errorf("v0.5.0 reads %q, this bindkit %q (%v)", got, want, ann)
			}
			written := ann[s.annotation]
			// v0.5.0 records a third Binding: gh's record stays as it was.
			ann = s.v050(maps.Clone(ann), thirdV050, 7)
			if got := s.readV050(ann, ghV050); got != want {
				t.Errorf("after v0.5.0 wrote another Binding's record, it reads gh's as %q, want %q (%q, was %q)", got, want, ann[s.annotation], written)
			}
			if got := s.readCurrent(ann, ghU1); got != want {
				t.Errorf("after v0.5.0 wrote another Binding's record, this bindkit reads gh's as %q, want %q", got, want)
			}
			// gh deleted under v0.5.0: nothing of it left behind.
			ann = v050Forget(ann, ghV050)
			if got := s.readCurrent(ann, ghU1) + s.readV050(ann, ghV050); got != "" || Names(ann, ghU1) {
				t.Errorf("gh forgotten by v0.5.0: still read as %q: %v", got, recordsOf(ann))
			}
			if got := s.readCurrent(ann, otherU3); got == "" {
				t.Errorf("forgetting gh under v0.5.0 lost other's %s record: %v", s.name, recordsOf(ann))
			}
		})
	}
}

// TestFormatCurrentReadsV050: records v0.5.0 wrote, of every shape, are
// read here as v0.5.0 reads them (no write on an upgrade), survive this
// bindkit's writes for another Binding, and go with their Binding.
func TestFormatCurrentReadsV050(t *testing.T) {
	for _, s := range shapes() {
		t.Run(s.name, func(t *testing.T) {
			ann := s.v050(nil, otherV050, 1)
			ann = s.v050(ann, ghV050, 3)
			want := s.readV050(ann, ghV050)
			if got := s.readCurrent(ann, ghU1); got != want || want == "" {
				t.Errorf("this bindkit reads %q, v0.5.0 %q (%v)", got, want, ann)
			}
			before := maps.Clone(ann)
			// Writing what it reads changes nothing: the value v0.5.0
			// wrote is the value this bindkit writes.
			if again := s.current(maps.Clone(ann), ghU1, 3); !cmp.Equal(recordsOf(again), recordsOf(before)) {
				t.Errorf("this bindkit writes gh's record differently from v0.5.0 (-v0.5.0 +this):\n%s", cmp.Diff(recordsOf(before), recordsOf(again)))
			}
			ann = s.current(maps.Clone(ann), thirdU4, 7)
			if got := s.readV050(ann, ghV050); got != want {
				t.Errorf("after this bindkit wrote another Binding's record, v0.5.0 reads gh's as %q, want %q", got, want)
			}
			ann = Forget(ann, ghU1)
			if got := s.readCurrent(ann, ghU1) + s.readV050(ann, ghV050); got != "" {
				t.Errorf("gh forgotten: still read as %q: %v", got, recordsOf(ann))
			}
			ann = Forget(Forget(ann, otherU3), thirdU4)
			if len(recordsOf(ann)) != 0 {
				t.Errorf("every Binding forgotten, records left: %v", recordsOf(ann))
			}
		})
	}
}

// TestFormatCurrentReadsPre050: the bound records bindkit wrote before it
// recorded UIDs ("<resource>.<group>/<name>:<generation>", its only
// record) are read here as that bindkit read them, kept by writes for
// other Bindings, and go with a Binding of the name. It had no paced,
// held or rollback records.
func TestFormatCurrentReadsPre050(t *testing.T) {
	gh, other := pre050BoundBy{Resource: ghBy.Resource, Name: "gh"}, pre050BoundBy{Resource: ghBy.Resource, Name: "other"}
	ann := pre050MarkBound(pre050MarkBound(nil, other, 1), gh, 3)
	if g, ok := BoundGeneration(ann, ghU1); !ok || g != 3 {
		t.Errorf("this bindkit reads gh's record as %d, %v; want 3, true (%v)", g, ok, ann)
	}
	wp := &WithPod{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(ann)}}
	MarkBound(wp, thirdU4, 7)
	if g, ok := pre050BoundGeneration(wp.Annotations, gh); !ok || g != 3 {
		t.Errorf("after this bindkit bound another Binding, the old reader reads gh at %d, %v: %v", g, ok, wp.Annotations)
	}
	MarkUnbound(wp, ghU1)
	if _, ok := pre050BoundGeneration(wp.Annotations, gh); ok || Names(wp.Annotations, ghU1) {
		t.Errorf("gh unbound, its record stays: %v", wp.Annotations)
	}
}

// TestFormatPre050MisreadsCurrent pins why the window is one release: the
// bindkit before UIDs, two releases back, reads "gh@u1:3" as a Binding
// named "gh@u1", so it would bind every subject again, and at gh's
// deletion leave the record behind. docs/upgrading.md says not to go
// back that far.
func TestFormatPre050MisreadsCurrent(t *testing.T) {
	gh := pre050BoundBy{Resource: ghBy.Resource, Name: "gh"}
	wp := &WithPod{}
	MarkBound(wp, ghU1, 3)
	if _, ok := pre050BoundGeneration(wp.Annotations, gh); ok {
		t.Fatalf("the bindkit before UIDs reads this bindkit's %q: update docs/upgrading.md, it can be downgraded to", wp.Annotations[BoundAnnotation])
	}
	if got := pre050MarkUnbound(maps.Clone(wp.Annotations), gh); got[BoundAnnotation] == "" {
		t.Errorf("the bindkit before UIDs removes %q at gh's deletion", wp.Annotations[BoundAnnotation])
	}
}

// TestFormatNewerLeftAlone: a record of a later format, of every shape,
// is no record here and no error, is kept byte for byte by every write
// for another Binding, names its Binding (NewerRecords, the index), and
// goes with its Binding, never duplicated.
func TestFormatNewerLeftAlone(t *testing.T) {
	for _, s := range shapes() {
		t.Run(s.name, func(t *testing.T) {
			ann := s.current(nil, otherU3, 1)
			ann = s.newer(ann, ghU1, 3)
			newer := newerEntryOf(t, s.annotation, ann[s.annotation])
			if got := s.readCurrent(ann, ghU1); got != "" {
				t.Errorf("a format-2 record read as format 1: %q", got)
			}
			if got := NewerRecords(ann, ghU1); !slices.Equal(got, []string{s.annotation}) {
				t.Errorf("NewerRecords(gh) = %v, want [%s]", got, s.annotation)
			}
			if got := NewerRecords(ann, ghU2); got != nil {
				t.Errorf("NewerRecords of gh's successor = %v, want none", got)
			}
			if !Names(ann, ghU1) {
				t.Error("Names(gh) is false with gh's format-2 record")
			}
			keys, _ := boundIndexFunc(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Annotations: ann}})
			if s.annotation != RollbackAnnotation && !slices.Contains(keys, BoundIndexKey("ns", ghU1)) {
				t.Errorf("BoundIndex keys %v leave out gh, whose deletion must find the subject", keys)
			}
			assertNoUnreadable(t, ann)
			// Every writer, for other Bindings: gh's entry stays.
			for name, write := range writers() {
				got := write(maps.Clone(ann))
				if e := newerEntryOf(t, s.annotation, got[s.annotation]); e != newer {
					t.Errorf("%s: gh's format-2 entry %q became %q (%v)", name, newer, e, recordsOf(got))
				}
			}
			// gh binds again (after an upgrade took it back, say): one
			// entry of gh, never two.
			again := s.current(maps.Clone(ann), ghU1, 4)
			if e := newerEntryOf(t, s.annotation, again[s.annotation]); e != "" || s.readCurrent(again, ghU1) == "" {
				t.Errorf("gh written again: format-2 entry %q left beside its entry (%v)", e, recordsOf(again))
			}
			// gh goes: so does its record.
			gone := Forget(maps.Clone(ann), ghU1)
			if Names(gone, ghU1) || s.readCurrent(gone, otherU3) == "" {
				t.Errorf("gh forgotten: %v", recordsOf(gone))
			}
			if s.annotation == BoundAnnotation {
				wp := &WithPod{ObjectMeta: metav1.ObjectMeta{Annotations: maps.Clone(ann)}}
				MarkUnbound(wp, ghU1)
				if Names(wp.Annotations, ghU1) {
					t.Errorf("gh unbound: %v", recordsOf(wp.Annotations))
				}
			}
		})
	}
}

// writers are this bindkit's writes of records of Bindings other than gh
// (third binds, other goes), each on a copy of a subject's annotations.
func writers() map[string]func(map[string]string) map[string]string {
	return map[string]func(map[string]string) map[string]string{
		"MarkBound(third)": func(ann map[string]string) map[string]string {
			wp := &WithPod{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
			MarkBound(wp, thirdU4, 7)
			return wp.Annotations
		},
		"MarkUnbound(other)": func(ann map[string]string) map[string]string {
			wp := &WithPod{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
			MarkUnbound(wp, otherU3)
			return wp.Annotations
		},
		"SetBound": func(ann map[string]string) map[string]string { return SetBound(ann, Bound{thirdU4: 7}) },
		"SetHeld":  func(ann map[string]string) map[string]string { return SetHeld(ann, Bound{thirdU4: 7}) },
		"SetChange(third)": func(ann map[string]string) map[string]string {
			return SetChange(ann, thirdU4, &Change{Generation: 7, Wave: 1, Since: since})
		},
		"SetChange(other, nil)": func(ann map[string]string) map[string]string { return SetChange(ann, otherU3, nil) },
		"SetRollback(third)": func(ann map[string]string) map[string]string {
			ann, _ = SetRollback(ann, thirdU4, 7, rollbackOfGen(7))
			return ann
		},
		"SetRollback(other, nil)": func(ann map[string]string) map[string]string {
			ann, _ = SetRollback(ann, otherU3, 0, nil)
			return ann
		},
		"Forget(other)": func(ann map[string]string) map[string]string { return Forget(ann, otherU3) },
	}
}

// newerEntryOf returns the format-2 entry of gh in an annotation's value
// (for RollbackAnnotation, its key and value), "" when there is none.
func newerEntryOf(t *testing.T, annotation, value string) string {
	t.Helper()
	if annotation == RollbackAnnotation {
		raw, err := rawRollbacks(value)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range raw {
			if by, f := EntryFormat(k); f == 2 && by == ghU1 {
				return k + "=" + string(v)
			}
		}
		return ""
	}
	for _, e := range newerEntries(value) {
		if by, _ := EntryFormat(e); by == ghU1 {
			return e
		}
	}
	return ""
}

// assertNoUnreadable: the readers report no error for a newer record.
func assertNoUnreadable(t *testing.T, ann map[string]string) {
	t.Helper()
	_, errB := ParseBound(ann[BoundAnnotation])
	_, errH := ParseBound(ann[HeldAnnotation])
	_, errC := ParseChanges(ann[RolloutAnnotation])
	_, errR := RollbacksOf(ann)
	for _, err := range []error{errB, errH, errC, errR} {
		if err != nil {
			t.Errorf("a format-2 record is read as unreadable: %v", err)
		}
	}
}

// TestFormatV050DropsNewer pins why a later format may be written only
// once the release before it reads it: v0.5.0 reads a format-2 record as
// unreadable and drops it at its next write for another Binding. From
// this release on, the record is left alone (TestFormatNewerLeftAlone).
func TestFormatV050DropsNewer(t *testing.T) {
	for _, s := range shapes() {
		t.Run(s.name, func(t *testing.T) {
			ann := s.newer(s.current(nil, otherU3, 1), ghU1, 3)
			got := s.v050(maps.Clone(ann), thirdV050, 7)
			if strings.Contains(got[s.annotation], ":v2;") {
				t.Errorf("v0.5.0 kept the format-2 record %q: docs/upgrading.md says it does not", got[s.annotation])
			}
		})
	}
}

func TestEntryFormat(t *testing.T) {
	tests := []struct {
		entry  string
		by     BoundBy
		format int
	}{
		{"githubbindings.bindings.bindkit.dev/gh@u1:3", ghU1, 1},
		{"githubbindings.bindings.bindkit.dev/gh:3", ghBy, 1},
		{" githubbindings.bindings.bindkit.dev/gh@u1:3:1:1764000000 ", ghU1, 1},
		{"githubbindings.bindings.bindkit.dev/gh@u1:3x", ghU1, 1}, // format 1's, unreadable
		{"githubbindings.bindings.bindkit.dev/gh@u1:x", BoundBy{}, 0},
		{"githubbindings.bindings.bindkit.dev/gh@u1:v2;3", ghU1, 2},
		{"githubbindings.bindings.bindkit.dev/gh@u1:v12", ghU1, 12},
		{"githubbindings.bindings.bindkit.dev/gh@u1:v1;3", BoundBy{}, 0},
		{"githubbindings.bindings.bindkit.dev/gh@u1:v", BoundBy{}, 0},
		{"githubbindings.bindings.bindkit.dev/gh@u1:", BoundBy{}, 0},
		{"githubbindings.bindings.bindkit.dev/gh@:v2", BoundBy{}, 0},
		{"gh:v2", BoundBy{}, 0},
		{"", BoundBy{}, 0},
	}
	for _, tc := range tests {
		by, f := EntryFormat(tc.entry)
		if by != tc.by || f != tc.format {
			t.Errorf("EntryFormat(%q) = %v, %d; want %v, %d", tc.entry, by, f, tc.by, tc.format)
		}
	}
}

// TestDropUnreadable: the audit's fix of an unreadable record drops what
// no format reads and keeps the rest, newer entries included.
func TestDropUnreadable(t *testing.T) {
	gh := "githubbindings.bindings.bindkit.dev/gh@u1"
	ann := map[string]string{
		BoundAnnotation:    gh + ":3,gh,things/third@u4:v2;7,things/x:y",
		HeldAnnotation:     gh + ":x",
		RolloutAnnotation:  gh + ":3:1:1764000000,things/third@u4:v2;7;1;1764000000,things/third:7:1",
		RollbackAnnotation: `{"` + gh + `:3":{"patch":[]},"` + gh + `:2":{"bound":"x"},"gh":{"patch":[]},"things/third@u4:v2;7":{"ops":1}}`,
		"other":            "kept",
	}
	want := map[string]string{
		BoundAnnotation:    gh + ":3,things/third@u4:v2;7",
		RolloutAnnotation:  gh + ":3:1:1764000000,things/third@u4:v2;7;1;1764000000",
		RollbackAnnotation: `{"` + gh + `:3":{"patch":[]},"things/third@u4:v2;7":{"ops":1}}`,
		"other":            "kept",
	}
	if diff := cmp.Diff(want, DropUnreadable(ann)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := DropUnreadable(map[string]string{RollbackAnnotation: "not json"}); len(got) != 0 {
		t.Errorf("an annotation that is not a JSON object: %v", got)
	}
}
