package duck

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// RecordFormat is the version of the record format this bindkit reads and
// writes on subjects (BoundAnnotation, RolloutAnnotation, HeldAnnotation,
// RollbackAnnotation). Workloads carry records for years, across releases
// that read them, so the format changes only in the way this comment
// fixes, and the docs (docs/upgrading.md) keep the window: a release
// writes only a format the release before it reads.
//
// Every entry of every record is "<identity>:<payload>". The identity,
// "<resource>.<group>/<name>@<uid>" ("@<uid>" absent in entries written
// before bindkit recorded UIDs), never changes: a reader always knows
// whose entry it is. In format 1 the payload starts with a digit: the
// generation, followed in a RolloutAnnotation entry by ":<wave>:<unix
// seconds>". A later format N starts its payload with "v<N>" (for
// example "githubbindings.bindings.bindkit.dev/gh@5f0c...:v2;..."), and
// RollbackAnnotation stays a JSON object keyed by entries.
//
// A reader leaves an entry of a format newer than its own alone: it
// neither reads it as a record of its own format nor drops it when it
// rewrites the annotation for another Binding (SetBound, SetHeld,
// SetChange and SetRollback keep it byte for byte), a Binding never
// binds or unbinds a subject that holds such a record of it
// (NewerRecords), and the record goes only with its Binding (Forget,
// MarkUnbound), so it is never duplicated nor left behind. An entry no
// format reads (no identity, or a payload that is neither) is not a
// record: it is reported (ParseBound's error, the audit) and dropped at
// the next write.
//
// Format 1 is what bindkit wrote as v0.5.0 (commit 0b55854) and writes
// now; the entries without "@<uid>" that bindkit wrote before commit
// 85d078a (2026-11-26) are read as format 1 too.
const RecordFormat = 1

// EntryFormat reads the identity and the format of one record entry (of
// any record annotation, or a RollbackAnnotation key): RecordFormat for
// an entry of this reader's format (whether or not its payload then
// parses), N for one a newer bindkit wrote in format N, with the
// identity by in both cases; 0 and no identity for an entry no format
// reads.
func EntryFormat(entry string) (by BoundBy, format int) {
	by, payload, ok := splitEntry(strings.TrimSpace(entry))
	if !ok || payload == "" {
		return BoundBy{}, 0
	}
	if payload[0] >= '0' && payload[0] <= '9' {
		return by, RecordFormat
	}
	if n, ok := markedFormat(payload); ok {
		return by, n
	}
	return BoundBy{}, 0
}

// splitEntry cuts an entry into its identity and its payload (everything
// after the identity's ':').
func splitEntry(entry string) (by BoundBy, payload string, ok bool) {
	key, payload, ok := strings.Cut(entry, ":")
	if !ok {
		return BoundBy{}, "", false
	}
	key, uid, withUID := strings.Cut(key, "@")
	resource, name, ok := strings.Cut(key, "/")
	if !ok || name == "" || resource == "" || (withUID && uid == "") {
		return BoundBy{}, "", false
	}
	return BoundBy{Resource: schema.ParseGroupResource(resource), Name: name, UID: types.UID(uid)}, payload, true
}

// markedFormat reads the "v<N>" a payload of format N > RecordFormat
// starts with (up to a character that is not a digit).
func markedFormat(payload string) (int, bool) {
	if len(payload) < 2 || payload[0] != 'v' {
		return 0, false
	}
	end := 1
	for end < len(payload) && payload[end] >= '0' && payload[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(payload[1:end])
	if err != nil || n <= RecordFormat {
		return 0, false
	}
	return n, true
}

// newerEntries returns the entries of a record annotation's value written
// in a format newer than RecordFormat, trimmed, in their order; nil, with
// no allocation, when there are none (a newer payload starts ":v").
func newerEntries(value string) []string {
	if !strings.Contains(value, ":v") {
		return nil
	}
	var out []string
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		if _, f := EntryFormat(entry); f > RecordFormat {
			out = append(out, entry)
		}
	}
	return out
}

// joinEntries is a record annotation's value: the entries this reader
// writes, and the newer ones it keeps but those of a Binding replaced
// names (by resource and name: a Binding, or its successor under the same
// name, that writes its record again) and those that Match drop, when
// set; sorted, so equal records give equal values.
func joinEntries[V any](written []string, kept []string, replaced map[BoundBy]V, drop *BoundBy) string {
	for _, entry := range kept {
		by, _ := EntryFormat(entry)
		if !sameKey(replaced, by) && (drop == nil || !drop.Matches(by)) {
			written = append(written, entry)
		}
	}
	slices.Sort(written)
	return strings.Join(written, ",")
}

// setList writes a list record annotation: value, or no annotation when
// value is empty. annotations is returned, allocated when nil and value
// is not empty.
func setList(annotations map[string]string, key, value string) map[string]string {
	if value == "" {
		delete(annotations, key)
		return annotations
	}
	if annotations == nil {
		annotations = make(map[string]string, 1)
	}
	annotations[key] = value
	return annotations
}

// NewerRecords returns the record annotations of annotations that hold an
// entry of by (one that Matches it) written in a format newer than
// RecordFormat: nil, with no allocation, when there are none. A Binding
// leaves such a subject as it is (see RecordFormat) until it is deleted.
func NewerRecords(annotations map[string]string, by BoundBy) []string {
	var out []string
	for _, key := range [...]string{BoundAnnotation, RolloutAnnotation, HeldAnnotation, RollbackAnnotation} {
		if names(newerIdentities(key, annotations[key]), by) {
			out = append(out, key)
		}
	}
	return out
}

// newerIdentities are the identities of the entries of a record
// annotation's value written in a newer format; a RollbackAnnotation's
// entries are its keys.
func newerIdentities(key, value string) []BoundBy {
	if !strings.Contains(value, ":v") {
		return nil
	}
	var entries []string
	if key == RollbackAnnotation {
		raw, err := rawRollbacks(value)
		if err != nil {
			return nil
		}
		for k := range raw {
			if _, f := EntryFormat(k); f > RecordFormat {
				entries = append(entries, k)
			}
		}
	} else {
		entries = newerEntries(value)
	}
	return identities(entries)
}

// names reports whether any of ids Matches by.
func names(ids []BoundBy, by BoundBy) bool {
	return slices.ContainsFunc(ids, by.Matches)
}

// sameKey reports whether e has the resource and name of one of bys.
func sameKey[V any](bys map[BoundBy]V, e BoundBy) bool {
	for by := range bys {
		if by.Resource == e.Resource && by.Name == e.Name {
			return true
		}
	}
	return false
}

// DropUnreadable removes from annotations' records (returned) the entries
// no format reads (a RollbackAnnotation's keys included), and a
// RollbackAnnotation that is not a JSON object or an entry of it whose
// value is not a Rollback: what ParseBound, ParseChanges and RollbacksOf
// report as unreadable, and what SetRollback drops. Readable entries and
// those of a newer format stay as they are. It is the audit's fix of an
// unreadable record.
func DropUnreadable(annotations map[string]string) map[string]string {
	if v, ok := annotations[BoundAnnotation]; ok {
		b, _ := ParseBound(v)
		annotations = setList(annotations, BoundAnnotation, joinEntries(b.entries(), newerEntries(v), Bound(nil), nil))
	}
	if v, ok := annotations[HeldAnnotation]; ok {
		h, _ := ParseBound(v)
		annotations = setList(annotations, HeldAnnotation, joinEntries(h.entries(), newerEntries(v), Bound(nil), nil))
	}
	if v, ok := annotations[RolloutAnnotation]; ok {
		c, _ := ParseChanges(v)
		annotations = setList(annotations, RolloutAnnotation, joinEntries(c.entries(), newerEntries(v), Bound(nil), nil))
	}
	if v, ok := annotations[RollbackAnnotation]; ok {
		raw, _ := rawRollbacks(v)
		readable, _ := RollbacksOf(annotations)
		for k := range raw {
			_, f := EntryFormat(k)
			if _, ok := readable[k]; f == 0 || (f == RecordFormat && !ok) {
				delete(raw, k)
			}
		}
		if len(raw) == 0 {
			delete(annotations, RollbackAnnotation)
		} else {
			js, _ := json.Marshal(raw) // raw messages that were decoded: they encode
			annotations[RollbackAnnotation] = string(js)
		}
	}
	return annotations
}
