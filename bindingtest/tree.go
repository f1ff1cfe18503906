package bindingtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A change is one difference between two pod templates, named by what a
// reader knows an entry by (spec.containers[app].env[LOG_LEVEL]) rather
// than by its index, so that "Do removed the user's LOG_LEVEL" reads the
// same whatever Do inserted before it.
type change struct {
	path          string
	kind          changeKind
	before, after any
}

type changeKind int

const (
	removed changeKind = iota // in before, not in after
	altered                   // in both, with another value
	added                     // in after only
	moved                     // a list whose common entries come in another order
)

// templateChanges returns the changes from before to after, pod templates
// compared as their JSON (so empty lists and absent ones are the same),
// list elements matched by name (volume mounts by mountPath, other
// unnamed elements by value).
// toTree is v's JSON as maps, lists and scalars.
func toTree(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("bindingtest: encode %T: %v", v, err)) // Kubernetes types always encode
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("bindingtest: decode %T: %v", v, err))
	}
	return withoutEmpty(out)
}

func diffTree(path, field string, a, b any, out *[]change) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range sortedKeys(av, bv) {
			x, inA := av[k]
			y, inB := bv[k]
			p := joinPath(path, k)
			switch {
			case !inB && keyed(x):
				diffTree(p, k, x, []any{}, out) // each entry, by name
			case !inA && keyed(y):
				diffTree(p, k, []any{}, y, out)
			case !inB:
				*out = append(*out, change{path: p, kind: removed, before: x})
			case !inA:
				*out = append(*out, change{path: p, kind: added, after: y})
			default:
				diffTree(p, k, x, y, out)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok || !(keyed(av) || len(av) == 0) || !(keyed(bv) || len(bv) == 0) {
			break
		}
		ka, kb := byKey(field, av), byKey(field, bv)
		if ka, kb := keysInOrder(field, av), keysInOrder(field, bv); !sameOrder(ka, kb) {
			*out = append(*out, change{path: path, kind: moved, before: ka, after: kb})
		}
		for _, k := range sortedKeys(ka, kb) {
			x, inA := ka[k]
			y, inB := kb[k]
			p := path + "[" + k + "]"
			switch {
			case !inB:
				*out = append(*out, change{path: p, kind: removed, before: x})
			case !inA:
				*out = append(*out, change{path: p, kind: added, after: y})
			default:
				diffTree(p, "", x, y, out)
			}
		}
		return
	}
	if !jsonEqual(a, b) {
		*out = append(*out, change{path: path, kind: altered, before: a, after: b})
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyed reports whether v is a list of objects, matched by key rather
// than compared as a whole.
func keyed(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range list {
		if _, ok := e.(map[string]any); !ok {
			return false
		}
	}
	return len(list) > 0
}

// byKey indexes a list of objects by their keys (keysInOrder).
func byKey(field string, list []any) map[string]any {
	out := map[string]any{}
	for i, k := range keysInOrder(field, list) {
		out[k] = list[i]
	}
	return out
}

// keysInOrder returns what identifies each object of a list: a volume
// mount's mountPath, else a name, a port number or the element itself. A
// key used twice gets a #2, #3, ... suffix.
func keysInOrder(field string, list []any) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range list {
		m := e.(map[string]any)
		var k string
		switch {
		case field == "volumeMounts" && m["mountPath"] != nil:
			k = fmt.Sprint(m["mountPath"])
		case m["name"] != nil:
			k = fmt.Sprint(m["name"])
		case m["containerPort"] != nil:
			k = fmt.Sprint(m["containerPort"])
		default:
			data, _ := json.Marshal(m)
			k = string(data)
		}
		base := k
		for n := 2; seen[k]; n++ {
			k = fmt.Sprintf("%s#%d", base, n)
		}
		seen[k] = true
		out = append(out, k)
	}
	return out
}

// sameOrder reports whether the keys a and b share come in the same order
// in both.
func sameOrder(a, b []string) bool {
	common := func(x, y []string) []string {
		return slices.DeleteFunc(slices.Clone(x), func(k string) bool { return !slices.Contains(y, k) })
	}
	return slices.Equal(common(a, b), common(b, a))
}

func sortedKeys[V any](a, b map[string]V) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// formatChanges writes up to max changes of the kinds asked for, one a
// line, with a count of the rest.
func formatChanges(changes []change, max int, kinds ...changeKind) string {
	var lines []string
	for _, c := range changes {
		if !slices.Contains(kinds, c.kind) {
			continue
		}
		var line string
		switch c.kind {
		case removed:
			line = fmt.Sprintf("  removes %s (was %s)", c.path, short(c.before))
		case added:
			line = fmt.Sprintf("  adds %s %s", c.path, short(c.after))
		case moved:
			line = fmt.Sprintf("  reorders %s", c.path)
		default:
			line = fmt.Sprintf("  changes %s from %s to %s", c.path, short(c.before), short(c.after))
		}
		lines = append(lines, line)
	}
	if len(lines) > max {
		lines = append(lines[:max], fmt.Sprintf("  and %d more", len(lines)-max))
	}
	return strings.Join(lines, "\n")
}

// short is v's JSON, cut to one short line.
func short(v any) string {
	data, _ := json.Marshal(v)
	s := string(data)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// ofKinds returns the changes of the given kinds.
func ofKinds(changes []change, kinds ...changeKind) []change {
	var out []change
	for _, c := range changes {
		if slices.Contains(kinds, c.kind) {
			out = append(out, c)
		}
	}
	return out
}
