package duck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// BoundAnnotation is the annotation on a subject that records which Bindings
// have bound it, and at which generation of each Binding. Both paths write
// it in the same patch as the change it records: admission when Do or Undo
// runs on a create or update, the reconciler when it binds or unbinds an
// existing subject. It is how the framework knows what to undo: a Binding
// unbinds only the subjects that list it, so it never undoes another
// Binding's work, and it finds what it bound even after its subject
// reference changed or it was deleted while the controller was down.
//
// The value is a comma-separated list of entries, sorted, one per Binding:
// "<resource>.<group>/<name>:<generation>", for example
// "githubbindings.bindings.bindkit.dev/gh:3". A Binding binds subjects in
// its own namespace only, so its name identifies it.
const BoundAnnotation = "bindings.bindkit.dev/bound"

// BoundBy identifies a Binding in a subject's BoundAnnotation: the Binding's
// resource and its name.
type BoundBy struct {
	Resource schema.GroupResource
	Name     string
}

// String is the entry's key, "<resource>.<group>/<name>".
func (b BoundBy) String() string { return b.Resource.String() + "/" + b.Name }

// Bound is the parsed value of a BoundAnnotation: the generation of each
// Binding that bound the subject. The zero value records nothing.
type Bound map[BoundBy]int64

// ParseBound parses a BoundAnnotation value. It reports an error, naming the
// entry, for a value it cannot read, with what it could read of the rest.
func ParseBound(value string) (Bound, error) {
	out := Bound{}
	if value == "" {
		return out, nil
	}
	var bad []string
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		key, gen, ok := strings.Cut(entry, ":")
		resource, name, ok2 := strings.Cut(key, "/")
		g, err := strconv.ParseInt(gen, 10, 64)
		if !ok || !ok2 || err != nil || name == "" || resource == "" || g < 0 {
			bad = append(bad, strconv.Quote(entry))
			continue
		}
		out[BoundBy{Resource: schema.ParseGroupResource(resource), Name: name}] = g
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("annotation %s: unreadable entries %s: want <resource>.<group>/<name>:<generation>", BoundAnnotation, strings.Join(bad, ", "))
	}
	return out, nil
}

// String formats b as a BoundAnnotation value: entries sorted, so equal
// records give equal values. An empty record formats as "".
func (b Bound) String() string {
	entries := make([]string, 0, len(b))
	for by, gen := range b {
		entries = append(entries, by.String()+":"+strconv.FormatInt(gen, 10))
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// BoundGeneration is BoundOf(annotations)[by] without building the record:
// the generation at which by bound the subject, and whether the record
// names it (its last entry for by, as ParseBound keeps). A reconcile checks
// every subject of its Binding this way, so it allocates nothing per
// subject.
func BoundGeneration(annotations map[string]string, by BoundBy) (generation int64, ok bool) {
	value := annotations[BoundAnnotation]
	if value == "" {
		return 0, false
	}
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		key, gen, ok1 := strings.Cut(entry, ":")
		resource, name, ok2 := strings.Cut(key, "/")
		if !ok1 || !ok2 || name == "" || name != by.Name || resource == "" || schema.ParseGroupResource(resource) != by.Resource {
			continue
		}
		if g, err := strconv.ParseInt(gen, 10, 64); err == nil && g >= 0 {
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
// and b is not empty); an empty b removes the annotation.
func SetBound(annotations map[string]string, b Bound) map[string]string {
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

// MarkBound records in wp that by bound it at generation; MarkUnbound
// removes by's entry. Both change wp's object annotations only, so
// CreatePatch sends the record in the same patch as the change it records.
func MarkBound(wp *WithPod, by BoundBy, generation int64) {
	b := BoundOf(wp.Annotations)
	b[by] = generation
	wp.Annotations = SetBound(wp.Annotations, b)
}

// MarkUnbound removes by's entry from wp's record.
func MarkUnbound(wp *WithPod, by BoundBy) {
	b := BoundOf(wp.Annotations)
	if _, ok := b[by]; !ok {
		return
	}
	delete(b, by)
	wp.Annotations = SetBound(wp.Annotations, b)
}
