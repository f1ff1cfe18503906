package duck

// The record reader and writer of bindkit v0.5.0 (commit 0b55854,
// duck/bound.go and duck/records.go), frozen: what that release does with
// the records on a subject, to check that what this bindkit writes is
// read by it without a write, and that what it wrote is read here. Do not
// change them to follow the code: they are the release as it shipped.
// Its functions are prefixed v050 and work on v050BoundBy, which has the
// same fields as BoundBy.

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

type v050BoundBy struct {
	Resource schema.GroupResource
	Name     string
	UID      types.UID
}

func (b v050BoundBy) String() string {
	if b.UID == "" {
		return b.Key()
	}
	return b.Key() + "@" + string(b.UID)
}

func (b v050BoundBy) Key() string { return b.Resource.String() + "/" + b.Name }

func (b v050BoundBy) Matches(o v050BoundBy) bool {
	return b.Resource == o.Resource && b.Name == o.Name && (b.UID == "" || o.UID == "" || b.UID == o.UID)
}

func (b v050BoundBy) Entry(generation int64) string {
	return b.String() + ":" + strconv.FormatInt(generation, 10)
}

type v050Bound map[v050BoundBy]int64

func v050ParseBound(value string) (v050Bound, bool) {
	out := v050Bound{}
	if value == "" {
		return out, true
	}
	ok := true
	for entry := range strings.SplitSeq(value, ",") {
		by, g, valid := v050ParseEntry(strings.TrimSpace(entry))
		if !valid {
			ok = false
			continue
		}
		out[by] = g
	}
	return out, ok
}

func v050ParseEntry(entry string) (v050BoundBy, int64, bool) {
	key, gen, ok := strings.Cut(entry, ":")
	if !ok {
		return v050BoundBy{}, 0, false
	}
	key, uid, withUID := strings.Cut(key, "@")
	resource, name, ok := strings.Cut(key, "/")
	g, err := strconv.ParseInt(gen, 10, 64)
	if !ok || err != nil || name == "" || resource == "" || g < 0 || (withUID && uid == "") {
		return v050BoundBy{}, 0, false
	}
	return v050BoundBy{Resource: schema.ParseGroupResource(resource), Name: name, UID: types.UID(uid)}, g, true
}

func (b v050Bound) String() string {
	entries := make([]string, 0, len(b))
	for by, gen := range b {
		entries = append(entries, by.Entry(gen))
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// v050BoundGeneration is what its reconciler asks of each subject: is it
// bound, at which generation (the last matching readable entry).
func v050BoundGeneration(annotations map[string]string, by v050BoundBy) (generation int64, ok bool) {
	value := annotations[BoundAnnotation]
	if value == "" {
		return 0, false
	}
	for entry := range strings.SplitSeq(value, ",") {
		e, g, valid := v050ParseEntry(strings.TrimSpace(entry))
		if valid && e.Matches(by) {
			generation, ok = g, true
		}
	}
	return generation, ok
}

func v050BoundOf(annotations map[string]string) v050Bound {
	b, _ := v050ParseBound(annotations[BoundAnnotation])
	return b
}

func v050SetBound(annotations map[string]string, b v050Bound) map[string]string {
	if len(b) == 0 {
		delete(annotations, BoundAnnotation)
		return annotations
	}
	if annotations == nil {
		annotations = make(map[string]string, 1)
	}
	annotations[BoundAnnotation] = b.String()
	return annotations
}

func v050MarkBound(annotations map[string]string, by v050BoundBy, generation int64) map[string]string {
	b := v050BoundOf(annotations)
	for e := range b {
		if e.Resource == by.Resource && e.Name == by.Name {
			delete(b, e)
		}
	}
	b[by] = generation
	return v050SetBound(annotations, b)
}

func v050MarkUnbound(annotations map[string]string, by v050BoundBy) map[string]string {
	b := v050BoundOf(annotations)
	n := len(b)
	for e := range b {
		if e.Matches(by) {
			delete(b, e)
		}
	}
	if len(b) == n {
		return annotations
	}
	return v050SetBound(annotations, b)
}

func v050HeldOf(annotations map[string]string) v050Bound {
	b, _ := v050ParseBound(annotations[HeldAnnotation])
	return b
}

func v050SetHeld(annotations map[string]string, held v050Bound) map[string]string {
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

type v050Change struct {
	Generation int64
	Wave       int
	Since      time.Time
}

type v050Changes map[v050BoundBy]v050Change

func v050ParseChanges(value string) (v050Changes, bool) {
	out := v050Changes{}
	if value == "" {
		return out, true
	}
	ok := true
	for entry := range strings.SplitSeq(value, ",") {
		by, c, valid := v050ParseChange(strings.TrimSpace(entry))
		if !valid {
			ok = false
			continue
		}
		out[by] = c
	}
	return out, ok
}

func v050ParseChange(entry string) (v050BoundBy, v050Change, bool) {
	i := strings.LastIndexByte(entry, ':')
	if i < 0 {
		return v050BoundBy{}, v050Change{}, false
	}
	since, err := strconv.ParseInt(entry[i+1:], 10, 64)
	rest := entry[:i]
	j := strings.LastIndexByte(rest, ':')
	if err != nil || j < 0 {
		return v050BoundBy{}, v050Change{}, false
	}
	wave, err := strconv.Atoi(rest[j+1:])
	if err != nil || wave < 0 {
		return v050BoundBy{}, v050Change{}, false
	}
	by, gen, ok := v050ParseEntry(rest[:j])
	if !ok {
		return v050BoundBy{}, v050Change{}, false
	}
	return by, v050Change{Generation: gen, Wave: wave, Since: time.Unix(since, 0).UTC()}, true
}

func v050ChangesOf(annotations map[string]string) v050Changes {
	c, _ := v050ParseChanges(annotations[RolloutAnnotation])
	return c
}

func (c v050Changes) Lookup(by v050BoundBy) (v050Change, bool) {
	if ch, ok := c[by]; ok {
		return ch, true
	}
	for e, ch := range c {
		if e.Matches(by) {
			return ch, true
		}
	}
	return v050Change{}, false
}

func (c v050Changes) String() string {
	entries := make([]string, 0, len(c))
	for by, ch := range c {
		entries = append(entries, by.Entry(ch.Generation)+":"+strconv.Itoa(ch.Wave)+":"+strconv.FormatInt(ch.Since.Unix(), 10))
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

func v050SetChange(annotations map[string]string, by v050BoundBy, ch *v050Change) map[string]string {
	c := v050ChangesOf(annotations)
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

type v050Rollback struct {
	Patch json.RawMessage `json:"patch"`
	Bound int64           `json:"bound,omitempty"`
}

type v050Rollbacks map[string]v050Rollback

func v050RollbacksOf(annotations map[string]string) (v050Rollbacks, bool) {
	v := annotations[RollbackAnnotation]
	out := v050Rollbacks{}
	if v == "" {
		return out, true
	}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return v050Rollbacks{}, false
	}
	return out, true
}

func (r v050Rollbacks) Find(by v050BoundBy) (key string, rb v050Rollback, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(r)) {
		if e, _, valid := v050ParseEntry(k); valid && e.Matches(by) {
			return k, r[k], true
		}
	}
	return "", v050Rollback{}, false
}

func v050SetRollback(annotations map[string]string, by v050BoundBy, generation int64, rb *v050Rollback) map[string]string {
	r, _ := v050RollbacksOf(annotations)
	_, had := annotations[RollbackAnnotation]
	for k := range r {
		if e, _, valid := v050ParseEntry(k); !valid || (e.Resource == by.Resource && e.Name == by.Name && (rb != nil || e.Matches(by))) {
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
		return annotations
	}
	js, _ := json.Marshal(r)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[RollbackAnnotation] = string(js)
	return annotations
}

func v050Forget(annotations map[string]string, by v050BoundBy) map[string]string {
	if b := v050BoundOf(annotations); len(b) > 0 {
		n := len(b)
		for e := range b {
			if e.Matches(by) {
				delete(b, e)
			}
		}
		if len(b) != n {
			annotations = v050SetBound(annotations, b)
		}
	}
	annotations = v050SetChange(annotations, by, nil)
	if h := v050HeldOf(annotations); len(h) > 0 {
		n := len(h)
		for e := range h {
			if e.Matches(by) {
				delete(h, e)
			}
		}
		if len(h) != n {
			annotations = v050SetHeld(annotations, h)
		}
	}
	return v050SetRollback(annotations, by, 0, nil)
}
