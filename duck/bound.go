package duck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// BoundAnnotation is the annotation on a subject that records which Bindings
// have bound it, and at which generation of each Binding. Every path writes
// it in the same write as the change it records: admission (the webhook, or
// a declarative kind's MutatingAdmissionPolicy) when it applies a Binding
// to a create or update, the reconciler when it binds or unbinds an
// existing subject, a rollback when it restores an earlier change. It is
// how the framework knows what to undo: a Binding unbinds only the
// subjects that record it, so it never undoes another Binding's work, and
// it finds what it bound even after its subject reference changed or it
// was deleted while the controller was down.
//
// The value is a comma-separated list of entries, sorted, one per Binding:
// "<resource>.<group>/<name>@<uid>:<generation>", for example
// "githubbindings.bindings.bindkit.dev/gh@5f0c9e3a-7d1b-4c1e-9a65-1b2a3c4d5e6f:3".
// A Binding binds subjects in its own namespace only, so its name and UID
// identify it; the UID keeps a Binding re-created under the same name from
// matching what its predecessor recorded. Entries without "@<uid>", as
// bindkit wrote them before it recorded UIDs, are read as belonging to
// whichever Binding has the name. Entries of a newer format are left
// alone (RecordFormat).
const BoundAnnotation = "bindings.bindkit.dev/bound"

// BoundBy identifies a Binding in a subject's BoundAnnotation: the Binding's
// resource, its name and its UID.
type BoundBy struct {
	Resource schema.GroupResource
	Name     string
	// UID is the Binding's UID. Empty in an entry written before bindkit
	// recorded UIDs; such an entry, and a BoundBy without a UID, match any
	// Binding of the name (see Matches).
	UID types.UID
}

// String is the entry's key, "<resource>.<group>/<name>@<uid>", without
// "@<uid>" when UID is empty.
func (b BoundBy) String() string {
	if b.UID == "" {
		return b.Key()
	}
	return b.Key() + "@" + string(b.UID)
}

// Key is "<resource>.<group>/<name>": the Binding whatever its UID, as
// BoundIndex keys it.
func (b BoundBy) Key() string { return b.Resource.String() + "/" + b.Name }

// Matches reports whether b and o name the same Binding: the same resource
// and name, and the same UID unless either has none (an entry written
// before UIDs were recorded).
func (b BoundBy) Matches(o BoundBy) bool {
	return b.Resource == o.Resource && b.Name == o.Name && (b.UID == "" || o.UID == "" || b.UID == o.UID)
}

// Entry formats b's record at generation, as it appears in the annotation:
// "<resource>.<group>/<name>@<uid>:<generation>".
func (b BoundBy) Entry(generation int64) string {
	return b.String() + ":" + strconv.FormatInt(generation, 10)
}

// Bound is the parsed value of a BoundAnnotation: the generation of each
// Binding that bound the subject. The zero value records nothing.
type Bound map[BoundBy]int64

// ParseBound parses a BoundAnnotation value. It reports an error, naming the
// entry, for a value it cannot read, with what it could read of the rest.
// Entries of a newer format (see RecordFormat) are not in the record and
// are no error: a newer bindkit wrote them, and this one leaves them alone.
func ParseBound(value string) (Bound, error) {
	out := Bound{}
	if value == "" {
		return out, nil
	}
	var bad []string
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		by, g, ok := parseEntry(entry)
		if !ok {
			if _, f := EntryFormat(entry); f <= RecordFormat {
				bad = append(bad, strconv.Quote(entry))
			}
			continue
		}
		out[by] = g
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("annotation %s: unreadable entries %s: want <resource>.<group>/<name>@<uid>:<generation>", BoundAnnotation, strings.Join(bad, ", "))
	}
	return out, nil
}

// ParseEntry reads one entry of a BoundAnnotation (or of an annotation
// that names Bindings the same way) of this reader's format:
// "<resource>.<group>/<name>@<uid>:<n>", "@<uid>" optional. An entry of a
// newer format is not ok (EntryFormat tells it apart).
func ParseEntry(entry string) (by BoundBy, n int64, ok bool) {
	return parseEntry(strings.TrimSpace(entry))
}

func parseEntry(entry string) (BoundBy, int64, bool) {
	by, gen, ok := splitEntry(entry)
	if !ok {
		return BoundBy{}, 0, false
	}
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil || g < 0 {
		return BoundBy{}, 0, false
	}
	return by, g, true
}

// String formats b as a BoundAnnotation value: entries sorted, so equal
// records give equal values. An empty record formats as "".
func (b Bound) String() string {
	entries := b.entries()
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// Lookup returns the generation at which the Binding by bound the subject:
// the entry with by's resource and name whose UID matches (Matches), the
// last in entry order when several do.
func (b Bound) Lookup(by BoundBy) (generation int64, ok bool) {
	if g, ok := b[by]; ok {
		return g, true
	}
	for e, g := range b {
		if e.Matches(by) {
			return g, true
		}
	}
	return 0, false
}

// BoundGeneration is BoundOf(annotations).Lookup(by) without building the
// record: the generation at which by bound the subject, and whether the
// record names it (an entry of by's resource and name whose UID matches;
// its last one, as ParseBound keeps). A reconcile checks every subject of
// its Binding this way, so it allocates nothing per subject.
func BoundGeneration(annotations map[string]string, by BoundBy) (generation int64, ok bool) {
	value := annotations[BoundAnnotation]
	if value == "" {
		return 0, false
	}
	for entry := range strings.SplitSeq(value, ",") {
		e, g, valid := parseEntry(strings.TrimSpace(entry))
		if valid && e.Matches(by) {
			generation, ok = g, true
		}
	}
	return generation, ok
}

// BoundOf reads the record of a subject's annotations. An unreadable value
// counts as what could be read of it: a Binding missing from the record
// binds the subject again, which Do's idempotence makes harmless.
func BoundOf(annotations map[string]string) Bound {
	b, _ := ParseBound(annotations[BoundAnnotation])
	return b
}

// SetBound writes b into annotations, which it returns (allocated when nil
// and the value is not empty), with the entries of a newer format (see
// RecordFormat) the annotation holds, but those of a Binding b names (by
// resource and name: b's entry replaces them); a value left empty removes
// the annotation.
func SetBound(annotations map[string]string, b Bound) map[string]string {
	return setList(annotations, BoundAnnotation, joinEntries(b.entries(), newerEntries(annotations[BoundAnnotation]), b, nil))
}

// entries are b's entries, unsorted.
func (b Bound) entries() []string {
	entries := make([]string, 0, len(b))
	for by, gen := range b {
		entries = append(entries, by.Entry(gen))
	}
	return entries
}

// MarkBound records in wp that by bound it at generation, in place of any
// entry of by's resource and name (a predecessor's of another UID
// included: its change is what by's Do replaces); MarkUnbound removes by's
// entry. Both change wp's object annotations only, so CreatePatch sends the
// record in the same patch as the change it records.
func MarkBound(wp *WithPod, by BoundBy, generation int64) {
	b := BoundOf(wp.Annotations)
	for e := range b {
		if e.Resource == by.Resource && e.Name == by.Name {
			delete(b, e)
		}
	}
	b[by] = generation
	wp.Annotations = SetBound(wp.Annotations, b)
}

// MarkUnbound removes by's entry from wp's record (every entry that
// Matches it, of any format).
func MarkUnbound(wp *WithPod, by BoundBy) {
	b := BoundOf(wp.Annotations)
	n := len(b)
	for e := range b {
		if e.Matches(by) {
			delete(b, e)
		}
	}
	newer := newerEntries(wp.Annotations[BoundAnnotation])
	if len(b) == n && !names(identities(newer), by) {
		return
	}
	wp.Annotations = setList(wp.Annotations, BoundAnnotation, joinEntries(b.entries(), newer, Bound(nil), &by))
}

// identities are the identities of entries.
func identities(entries []string) []BoundBy {
	out := make([]BoundBy, 0, len(entries))
	for _, e := range entries {
		by, _ := EntryFormat(e)
		out = append(out, by)
	}
	return out
}
