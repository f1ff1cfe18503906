package duck

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The records a rollout policy keeps on a subject besides BoundAnnotation.
// Each is written in the same patch as the change it describes, names each
// Binding as BoundAnnotation does (resource, name and UID), keeps one entry
// per Binding so that Bindings sharing a subject never overwrite each
// other, and is removed with its Binding (its finalizer, or an uninstall).
const (
	// RolloutAnnotation records the paced changes made to the subject:
	// for each Binding whose rollout changed it, the generation it was
	// changed to, the wave that changed it and when. It is written with
	// the change, so whoever leads next knows every subject a wave
	// changed, even one its predecessor died before reporting; it stays
	// after the subject has rolled out (the Binding's status says which
	// have). The value is a comma-separated, sorted list of
	// "<resource>.<group>/<name>@<uid>:<generation>:<wave>:<unix seconds>".
	RolloutAnnotation = "bindings.bindkit.dev/rollout"
	// RollbackAnnotation holds, under a policy that rolls back, the JSON
	// patch that gives the subject back its pod template and bound record
	// from before a Binding's paced change: a JSON object whose keys are
	// BoundAnnotation entries ("<resource>.<group>/<name>@<uid>:<generation>",
	// the Binding at the generation it changed the subject to) and whose
	// values are the patches. It is written with the change; a later paced
	// change by the same Binding replaces its entry.
	RollbackAnnotation = "bindings.bindkit.dev/rollback"
	// HeldAnnotation names the Bindings, at a generation each, whose
	// change was rolled back from the subject after their rollout halted:
	// admission (the webhook and the policy) does not apply that
	// generation of that Binding to the subject, so an update by anyone
	// else does not undo the rollback. The value is a comma-separated,
	// sorted list of BoundAnnotation entries. The Binding's next
	// generation, when its rollout reaches the subject, lifts the hold.
	HeldAnnotation = "bindings.bindkit.dev/held"
)

// RecordAnnotations are the annotations through which bindkit records, on
// a subject, what Bindings did to it. A subject's slim copy in the
// process's cache keeps these, and BoundIndex indexes them.
var RecordAnnotations = []string{BoundAnnotation, RolloutAnnotation, HeldAnnotation}

// HeldOf reads a subject's HeldAnnotation: the generation of each Binding
// held. Unreadable entries are skipped.
func HeldOf(annotations map[string]string) Bound {
	b, _ := ParseBound(annotations[HeldAnnotation])
	return b
}

// SetHeld writes held into annotations as HeldAnnotation (removed when
// empty) and returns them.
func SetHeld(annotations map[string]string, held Bound) map[string]string {
	if len(held) == 0 {
		delete(annotations, HeldAnnotation)
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[HeldAnnotation] = held.String()
	return annotations
}

// Change is a Binding's paced change of one subject, as RolloutAnnotation
// records it.
type Change struct {
	// Generation is the Binding's generation the subject was changed to.
	Generation int64
	// Wave is the rollout's wave that changed it, from 1.
	Wave int
	// Since is when (to the second): the rollout's deadline runs from it.
	Since time.Time
}

// Changes is the parsed value of a RolloutAnnotation: each Binding's last
// paced change of the subject.
type Changes map[BoundBy]Change

// ParseChanges reads a RolloutAnnotation value. It reports an error naming
// the entries it cannot read, with what it could read of the rest.
func ParseChanges(value string) (Changes, error) {
	out := Changes{}
	if value == "" {
		return out, nil
	}
	var bad []string
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		by, c, ok := parseChange(entry)
		if !ok {
			bad = append(bad, strconv.Quote(entry))
			continue
		}
		out[by] = c
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("annotation %s: unreadable entries %s: want <resource>.<group>/<name>@<uid>:<generation>:<wave>:<unix seconds>", RolloutAnnotation, strings.Join(bad, ", "))
	}
	return out, nil
}

// parseChange reads "<key>:<generation>:<wave>:<unix seconds>".
func parseChange(entry string) (BoundBy, Change, bool) {
	i := strings.LastIndexByte(entry, ':')
	if i < 0 {
		return BoundBy{}, Change{}, false
	}
	since, err := strconv.ParseInt(entry[i+1:], 10, 64)
	rest := entry[:i]
	j := strings.LastIndexByte(rest, ':')
	if err != nil || j < 0 {
		return BoundBy{}, Change{}, false
	}
	wave, err := strconv.Atoi(rest[j+1:])
	if err != nil || wave < 0 {
		return BoundBy{}, Change{}, false
	}
	by, gen, ok := parseEntry(rest[:j])
	if !ok {
		return BoundBy{}, Change{}, false
	}
	return by, Change{Generation: gen, Wave: wave, Since: time.Unix(since, 0).UTC()}, true
}

// ChangesOf reads a subject's RolloutAnnotation; unreadable entries are
// skipped.
func ChangesOf(annotations map[string]string) Changes {
	c, _ := ParseChanges(annotations[RolloutAnnotation])
	return c
}

// Lookup returns the change by made, matching its UID as Bound.Lookup
// does.
func (c Changes) Lookup(by BoundBy) (Change, bool) {
	if ch, ok := c[by]; ok {
		return ch, true
	}
	for e, ch := range c {
		if e.Matches(by) {
			return ch, true
		}
	}
	return Change{}, false
}

// String formats c as a RolloutAnnotation value, entries sorted.
func (c Changes) String() string {
	entries := make([]string, 0, len(c))
	for by, ch := range c {
		entries = append(entries, by.Entry(ch.Generation)+":"+strconv.Itoa(ch.Wave)+":"+strconv.FormatInt(ch.Since.Unix(), 10))
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// SetChange records in annotations (returned, allocated when nil) that by
// changed the subject (ch), in place of any entry of by's resource and
// name; a nil ch removes by's entries.
func SetChange(annotations map[string]string, by BoundBy, ch *Change) map[string]string {
	c := ChangesOf(annotations)
	n := len(c)
	for e := range c {
		if e.Resource == by.Resource && e.Name == by.Name && (ch != nil || e.Matches(by)) {
			delete(c, e)
		}
	}
	if ch == nil && len(c) == n {
		return annotations
	}
	if ch != nil {
		c[by] = *ch
	}
	if len(c) == 0 {
		delete(annotations, RolloutAnnotation)
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[RolloutAnnotation] = c.String()
	return annotations
}

// Rollback is how to take one Binding's paced change back from a subject.
type Rollback struct {
	// Patch is a JSON patch of the subject's pod template from after the
	// change to before it, each value it replaces or removes tested first
	// (Guard, against the object as the change left it): applied after
	// someone else changed what it would undo, it fails rather than undo
	// their change.
	Patch json.RawMessage `json:"patch"`
	// Bound is the generation of the Binding the subject carried before
	// the change; 0 when it did not carry the Binding.
	Bound int64 `json:"bound,omitempty"`
}

// Rollbacks is the parsed value of a RollbackAnnotation: for each Binding
// at the generation it changed the subject to (a BoundAnnotation entry),
// how to take the change back.
type Rollbacks map[string]Rollback

// RollbacksOf reads a subject's RollbackAnnotation. A value that is not a
// JSON object of Rollbacks (one written by a bindkit before this format,
// say) reads as none, with the error.
func RollbacksOf(annotations map[string]string) (Rollbacks, error) {
	v := annotations[RollbackAnnotation]
	out := Rollbacks{}
	if v == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return Rollbacks{}, fmt.Errorf("annotation %s: %w", RollbackAnnotation, err)
	}
	return out, nil
}

// Find returns by's rollback entry: its key (the Binding at the
// generation the change made) and the rollback.
func (r Rollbacks) Find(by BoundBy) (key string, rb Rollback, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(r)) {
		if e, _, valid := parseEntry(k); valid && e.Matches(by) {
			return k, r[k], true
		}
	}
	return "", Rollback{}, false
}

// SetRollback records in annotations (returned, allocated when nil) how
// to take back by's change to generation, in place of any entry of by's
// resource and name; a nil rb removes by's entries. Unreadable entries,
// or an unreadable annotation, are dropped.
func SetRollback(annotations map[string]string, by BoundBy, generation int64, rb *Rollback) (map[string]string, error) {
	r, _ := RollbacksOf(annotations)
	_, had := annotations[RollbackAnnotation]
	for k := range r {
		if e, _, valid := parseEntry(k); !valid || (e.Resource == by.Resource && e.Name == by.Name && (rb != nil || e.Matches(by))) {
			delete(r, k)
		}
	}
	if rb != nil {
		r[by.Entry(generation)] = *rb
	}
	if len(r) == 0 {
		if had {
			delete(annotations, RollbackAnnotation)
		}
		return annotations, nil
	}
	js, err := json.Marshal(r)
	if err != nil {
		return annotations, fmt.Errorf("annotation %s: %w", RollbackAnnotation, err)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[RollbackAnnotation] = string(js)
	return annotations, nil
}

// Forget removes every record of by from annotations (returned): its
// bound entry, its paced change, its rollback and its hold. It is what a
// Binding that goes leaves behind it: nothing.
func Forget(annotations map[string]string, by BoundBy) map[string]string {
	if b := BoundOf(annotations); len(b) > 0 {
		n := len(b)
		for e := range b {
			if e.Matches(by) {
				delete(b, e)
			}
		}
		if len(b) != n {
			annotations = SetBound(annotations, b)
		}
	}
	annotations = SetChange(annotations, by, nil)
	if h := HeldOf(annotations); len(h) > 0 {
		n := len(h)
		for e := range h {
			if e.Matches(by) {
				delete(h, e)
			}
		}
		if len(h) != n {
			annotations = SetHeld(annotations, h)
		}
	}
	annotations, _ = SetRollback(annotations, by, 0, nil)
	return annotations
}

// Names reports whether any record of annotations names by.
func Names(annotations map[string]string, by BoundBy) bool {
	if _, ok := BoundGeneration(annotations, by); ok {
		return true
	}
	if _, ok := ChangesOf(annotations).Lookup(by); ok {
		return true
	}
	if _, ok := HeldOf(annotations).Lookup(by); ok {
		return true
	}
	r, _ := RollbacksOf(annotations)
	_, _, ok := r.Find(by)
	return ok
}
