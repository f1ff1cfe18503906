package duck

// The record reader and writer of bindkit before it recorded Binding UIDs
// (commit 6dac81b, the parent of 85d078a, 2026-11-25; no release number),
// frozen as it shipped: the bound record only, "<resource>.<group>/<name>:<generation>",
// no rollout, rollback or held records. Its functions are prefixed pre050.

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

type pre050BoundBy struct {
	Resource schema.GroupResource
	Name     string
}

func (b pre050BoundBy) String() string { return b.Resource.String() + "/" + b.Name }

type pre050Bound map[pre050BoundBy]int64

func pre050ParseBound(value string) (pre050Bound, bool) {
	out := pre050Bound{}
	if value == "" {
		return out, true
	}
	ok := true
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		key, gen, ok1 := strings.Cut(entry, ":")
		resource, name, ok2 := strings.Cut(key, "/")
		g, err := strconv.ParseInt(gen, 10, 64)
		if !ok1 || !ok2 || err != nil || name == "" || resource == "" || g < 0 {
			ok = false
			continue
		}
		out[pre050BoundBy{Resource: schema.ParseGroupResource(resource), Name: name}] = g
	}
	return out, ok
}

func (b pre050Bound) String() string {
	entries := make([]string, 0, len(b))
	for by, gen := range b {
		entries = append(entries, by.String()+":"+strconv.FormatInt(gen, 10))
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

func pre050BoundGeneration(annotations map[string]string, by pre050BoundBy) (generation int64, ok bool) {
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

func pre050BoundOf(annotations map[string]string) pre050Bound {
	b, _ := pre050ParseBound(annotations[BoundAnnotation])
	return b
}

func pre050SetBound(annotations map[string]string, b pre050Bound) map[string]string {
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

func pre050MarkBound(annotations map[string]string, by pre050BoundBy, generation int64) map[string]string {
	b := pre050BoundOf(annotations)
	b[by] = generation
	return pre050SetBound(annotations, b)
}

func pre050MarkUnbound(annotations map[string]string, by pre050BoundBy) map[string]string {
	b := pre050BoundOf(annotations)
	if _, ok := b[by]; !ok {
		return annotations
	}
	delete(b, by)
	return pre050SetBound(annotations, b)
}
