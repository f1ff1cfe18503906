package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/psbinding"
)

// Where why read the spec of the generation a workload carries.
const (
	carriedFromCurrent = "current"         // the Binding is at that generation
	carriedFromHistory = "rollout-history" // psbinding.RolloutHistoryAnnotation
)

// maxSpecChanges is how many changed spec fields why prints of a
// generation; -o json has the whole spec.
const maxSpecChanges = 8

// carriedSpec returns the Binding's spec at generation gen, the one a
// workload carries: the Binding's own when it is at gen, else the
// rollout history's (psbinding.HistoryOf: the generations whose rollout
// completed); from says which, "" when neither holds it.
func carriedSpec(annotations map[string]string, current int64, currentSpec json.RawMessage, gen int64) (spec json.RawMessage, from string) {
	if gen == current {
		return currentSpec, carriedFromCurrent
	}
	history, _ := psbinding.HistoryOf(annotations)
	for _, e := range history {
		if e.Generation == gen && len(e.Spec) > 0 {
			return e.Spec, carriedFromHistory
		}
	}
	return nil, ""
}

// specChanges lists, field by field, how spec to differs from spec from:
// "sink: https://a -> https://b", "forwarderImage: (none) -> img", at
// most maxSpecChanges of them and a count of the rest.
func specChanges(from, to json.RawMessage) []string {
	a, b := flatten(from), flatten(to)
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		if a[k] == b[k] {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", k, orNone(a[k]), orNone(b[k])))
	}
	if len(out) > maxSpecChanges {
		out = append(out[:maxSpecChanges], fmt.Sprintf("and %d more fields (-o json has both specs)", len(out)-maxSpecChanges))
	}
	return out
}

// flatten maps each leaf of a JSON document to its value: strings bare,
// other values as JSON, at dotted paths (list items by index).
func flatten(doc json.RawMessage) map[string]string {
	out := map[string]string{}
	var v any
	if len(doc) == 0 || json.Unmarshal(doc, &v) != nil {
		return out
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			for i, e := range t {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			out[path] = t
		default:
			js, _ := json.Marshal(t)
			out[path] = string(js)
		}
	}
	walk("", v)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// templateValues reads, in a workload's pod template, the values of what
// a declared Spec adds (its env vars, volumes, containers by name): what
// the workload carries of them now, "(absent)" for what it lacks.
func templateValues(s *declarative.Spec, pod *corev1.PodSpec) []string {
	var out []string
	all := slices.Concat(pod.InitContainers, pod.Containers)
	for _, e := range s.Env {
		v := "(absent)"
		for _, c := range all {
			if i := slices.IndexFunc(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }); i >= 0 {
				v = c.Env[i].Value
				if c.Env[i].ValueFrom != nil {
					v = "(from a source)"
				}
				break
			}
		}
		out = append(out, "env "+e.Name+"="+v)
	}
	for _, vol := range s.Volumes {
		v := "volume " + vol.Name
		if !slices.ContainsFunc(pod.Volumes, func(x corev1.Volume) bool { return x.Name == vol.Name }) {
			v += " (absent)"
		}
		out = append(out, v)
	}
	for _, c := range slices.Concat(s.InitContainers, s.Containers) {
		i := slices.IndexFunc(all, func(x corev1.Container) bool { return x.Name == c.Name })
		if i < 0 {
			out = append(out, "container "+c.Name+" (absent)")
		} else {
			out = append(out, "container "+c.Name+" ("+all[i].Image+")")
		}
	}
	return out
}
