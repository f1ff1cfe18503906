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
// empty) and returns them, with the entries of a newer format the
// annotation holds, as SetBound does.
func SetHeld(annotations map[string]string, held Bound) map[string]string {
	return setList(annotations, HeldAnnotation, joinEntries(held.entries(), newerEntries(annotations[HeldAnnotation]), held, nil))
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
// the entries it cannot read, with what it could read of the rest;
// entries of a newer format are left out, as ParseBound does.
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
			if _, f := EntryFormat(entry); f <= RecordFormat {
				bad = append(bad, strconv.Quote(entry))
			}
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
	by, payload, ok := splitEntry(entry)
	if !ok {
		return BoundBy{}, Change{}, false
	}
	gen, rest, ok1 := strings.Cut(payload, ":")
	w, s, ok2 := strings.Cut(rest, ":")
	g, err1 := strconv.ParseInt(gen, 10, 64)
	wave, err2 := strconv.Atoi(w)
	since, err3 := strconv.ParseInt(s, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil || g < 0 || wave < 0 {
		return BoundBy{}, Change{}, false
	}
	return by, Change{Generation: g, Wave: wave, Since: time.Unix(since, 0).UTC()}, true
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
	entries := c.entries()
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// entries are c's entries, unsorted.
func (c Changes) entries() []string {
	entries := make([]string, 0, len(c))
	for by, ch := range c {
		entries = append(entries, by.Entry(ch.Generation)+":"+strconv.Itoa(ch.Wave)+":"+strconv.FormatInt(ch.Since.Unix(), 10))
	}
	return entries
}

// SetChange records in annotations (returned, allocated when nil) that by
// changed the subject (ch), in place of any entry of by's resource and
// name; a nil ch removes by's entries (every entry that Matches by, of
// any format). Entries of a newer format of other Bindings are kept, as
// SetBound keeps them.
func SetChange(annotations map[string]string, by BoundBy, ch *Change) map[string]string {
	c := ChangesOf(annotations)
	newer := newerEntries(annotations[RolloutAnnotation])
	n := len(c)
	for e := range c {
		if e.Resource == by.Resource && e.Name == by.Name && (ch != nil || e.Matches(by)) {
			delete(c, e)
		}
	}
	if ch == nil && len(c) == n && !names(identities(newer), by) {
		return annotations
	}
	drop := &by
	if ch != nil {
		c[by] = *ch
		drop = nil
	}
	return setList(annotations, RolloutAnnotation, joinEntries(c.entries(), newer, c, drop))
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
// JSON object (one written by a bindkit before this format, say) reads as
// none, with the error; so does an entry of this format whose value is
// not a Rollback. Entries of a newer format (see RecordFormat) are left
// out, with no error.
func RollbacksOf(annotations map[string]string) (Rollbacks, error) {
	out := Rollbacks{}
	raw, err := rawRollbacks(annotations[RollbackAnnotation])
	if err != nil {
		return out, err
	}
	var bad []string
	for k, v := range raw {
		if _, f := EntryFormat(k); f > RecordFormat {
			continue
		}
		var rb Rollback
		if err := json.Unmarshal(v, &rb); err != nil {
			bad = append(bad, strconv.Quote(k))
			continue
		}
		out[k] = rb
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return out, fmt.Errorf("annotation %s: unreadable entries %s: want {\"patch\": [...], \"bound\": <generation>}", RollbackAnnotation, strings.Join(bad, ", "))
	}
	return out, nil
}

// rawRollbacks reads a RollbackAnnotation value as a JSON object, each
// entry's value as written.
func rawRollbacks(value string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if value == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return map[string]json.RawMessage{}, fmt.Errorf("annotation %s: %w", RollbackAnnotation, err)
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
// resource and name; a nil rb removes by's entries (every entry that
// Matches by, of any format). The entries of other Bindings stay as
// written, those of a newer format included; entries no format reads, or
// an annotation that is not a JSON object, are dropped.
func SetRollback(annotations map[string]string, by BoundBy, generation int64, rb *Rollback) (map[string]string, error) {
	r, _ := rawRollbacks(annotations[RollbackAnnotation])
	_, had := annotations[RollbackAnnotation]
	for k := range r {
		if e, f := EntryFormat(k); f == 0 || (e.Resource == by.Resource && e.Name == by.Name && (rb != nil || e.Matches(by))) {
			delete(r, k)
		}
	}
	if rb != nil {
		js, err := json.Marshal(rb)
		if err != nil {
			return annotations, fmt.Errorf("annotation %s: %w", RollbackAnnotation, err)
		}
		r[by.Entry(generation)] = js
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
// bound entry, its paced change, its rollback and its hold, in any format
// (see RecordFormat). It is what a Binding that goes leaves behind it:
// nothing.
func Forget(annotations map[string]string, by BoundBy) map[string]string {
	for _, key := range [...]string{BoundAnnotation, HeldAnnotation} {
		b, _ := ParseBound(annotations[key])
		newer := newerEntries(annotations[key])
		n := len(b)
		for e := range b {
			if e.Matches(by) {
				delete(b, e)
			}
		}
		if len(b) != n || names(identities(newer), by) {
			annotations = setList(annotations, key, joinEntries(b.entries(), newer, Bound(nil), &by))
		}
	}
	annotations = SetChange(annotations, by, nil)
	annotations, _ = SetRollback(annotations, by, 0, nil)
	return annotations
}

// Names reports whether any record of annotations names by, in any
// format.
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
	if _, _, ok := r.Find(by); ok {
		return true
	}
	return len(NewerRecords(annotations, by)) > 0
}
