package bindingtest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// CheckBounded fails t naming every field of the spec, in every version of
// the CRD at path, whose size its schema leaves unbounded: a string with
// no maxLength, enum or format, a list with no maxItems, a map with no
// maxProperties. A Binding is read at every admission of its subjects and
// copied into the admission policies' parameters, so bindkit needs its
// size bounded by its schema. `bindkit generate` adds default bounds where
// they are missing; controller-gen alone (kubebuilder's make manifests)
// writes only the type's markers (+kubebuilder:validation:MaxLength,
// MaxItems, MaxProperties, Enum), and this check says which are missing.
// A label selector with rules of its own (tracker.Reference's), an
// int-or-string and a field that keeps unknown fields are taken as
// bounded.
func CheckBounded(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (make manifests writes the CRD)", err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]any `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(crd.Spec.Versions) == 0 {
		t.Fatalf("%s: no CRD versions", path)
	}
	for _, v := range crd.Spec.Versions {
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].(map[string]any)
		if !ok {
			t.Errorf("%s: version %s has no spec", path, v.Name)
			continue
		}
		for _, field := range unbounded("spec", spec) {
			t.Errorf("%s: version %s: %s has no bound: give its field a marker (%s)", path, v.Name, field.path, field.marker)
		}
	}
}

// unboundedField is a field of a schema without a bound, and the marker
// that gives it one.
type unboundedField struct{ path, marker string }

// unbounded returns the fields under schema s, at path, that have no
// bound, sorted by path.
func unbounded(path string, s map[string]any) []unboundedField {
	if s["x-kubernetes-int-or-string"] == true || s["x-kubernetes-preserve-unknown-fields"] == true || selectorWithRules(s) {
		return nil
	}
	var out []unboundedField
	_, enum := s["enum"]
	switch s["type"] {
	case "string":
		if _, ok := s["maxLength"]; !ok && !enum && s["format"] == nil {
			out = append(out, unboundedField{path, "+kubebuilder:validation:MaxLength=N or Enum"})
		}
	case "array":
		if _, ok := s["maxItems"]; !ok {
			out = append(out, unboundedField{path, "+kubebuilder:validation:MaxItems=N"})
		}
		if items, ok := s["items"].(map[string]any); ok {
			out = append(out, element(path, unbounded(path+"[*]", items), func(m string) string {
				return strings.Replace(m, "validation:", "validation:items:", 1)
			})...)
		}
	case "object":
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			if _, ok := s["maxProperties"]; !ok {
				out = append(out, unboundedField{path, "+kubebuilder:validation:MaxProperties=N"})
			}
			out = append(out, element(path, unbounded(path+"[*]", ap), func(m string) string {
				return "a value type of its own, with " + m
			})...)
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			if p, ok := p.(map[string]any); ok {
				out = append(out, unbounded(fmt.Sprintf("%s.%s", path, name), p)...)
			}
		}
	}
	slices.SortFunc(out, func(a, b unboundedField) int {
		switch {
		case a.path < b.path:
			return -1
		case a.path > b.path:
			return 1
		}
		return 0
	})
	return out
}

// element rewrites the marker of the unbounded element of a list or map
// at path (path[*]) with marker, the marker as it is given on the field
// holding the list or the map.
func element(path string, fields []unboundedField, marker func(string) string) []unboundedField {
	for i, f := range fields {
		if f.path == path+"[*]" {
			fields[i].marker = marker(f.marker)
		}
	}
	return fields
}

// selectorWithRules reports a label selector that carries rules of its
// own (x-kubernetes-validations), as tracker.Reference's Selector does:
// its rules bound its labels and expressions.
func selectorWithRules(s map[string]any) bool {
	props, _ := s["properties"].(map[string]any)
	_, labels := props["matchLabels"]
	_, exprs := props["matchExpressions"]
	rules, _ := s["x-kubernetes-validations"].([]any)
	return labels && exprs && len(rules) > 0
}
