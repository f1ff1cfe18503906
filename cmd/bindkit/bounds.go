package main

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"
)

// The bounds `bindkit generate` gives what a Binding's spec leaves
// unbounded: every string, list and map a user writes. A Binding is copied
// into every subject's admission (as the MutatingAdmissionPolicy's
// params) and its Spec into every subject: with them a Binding's size is
// bounded by its schema, and the kube-apiserver can estimate the cost of
// its CEL rules. A field's own marker (+kubebuilder:validation:MaxLength,
// MaxItems, MaxProperties, or an enum) wins, and a label selector with
// rules of its own (tracker.Reference's) is left alone: a type whose
// fields all carry their bounds as markers gets the same CRD from
// controller-gen alone (kubebuilder's make manifests) as from generate.
const (
	DefaultMaxLength     = 1024
	DefaultMaxItems      = 64
	DefaultMaxProperties = 64
)

// boundSpec adds the default bounds to the spec schema of every version
// of the CRD data (as controller-gen writes it: "---" then YAML, which
// sigs.k8s.io/yaml writes back unchanged).
func boundSpec(data []byte) ([]byte, error) {
	body := bytes.TrimPrefix(data, []byte("---\n"))
	var crd map[string]any
	if err := yaml.Unmarshal(body, &crd); err != nil {
		return nil, fmt.Errorf("read the CRD: %w", err)
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		props, _ := root["properties"].(map[string]any)
		if s, ok := props["spec"].(map[string]any); ok {
			boundSelectors(s)
			bound(s)
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

// bound adds the default bounds to schema s and everything under it.
func bound(s map[string]any) {
	if s["x-kubernetes-int-or-string"] == true || s["x-kubernetes-preserve-unknown-fields"] == true || boundedSelector(s) {
		return
	}
	_, enum := s["enum"]
	switch s["type"] {
	case "string":
		if _, ok := s["maxLength"]; !ok && !enum && s["format"] == nil {
			s["maxLength"] = DefaultMaxLength
		}
	case "array":
		if _, ok := s["maxItems"]; !ok {
			s["maxItems"] = DefaultMaxItems
		}
		if items, ok := s["items"].(map[string]any); ok {
			bound(items)
		}
	case "object":
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			if _, ok := s["maxProperties"]; !ok {
				s["maxProperties"] = DefaultMaxProperties
			}
			bound(ap)
		}
		if props, ok := s["properties"].(map[string]any); ok {
			for _, p := range props {
				if p, ok := p.(map[string]any); ok {
					bound(p)
				}
			}
		}
	}
}

// boundedSelector reports a label selector that carries rules of its own
// (x-kubernetes-validations): tracker.Reference's Selector, whose markers
// bound it, so that the CRD controller-gen writes alone (kubebuilder's
// make manifests) is the one generate writes. It is left as it is.
func boundedSelector(s map[string]any) bool {
	props, _ := s["properties"].(map[string]any)
	_, labels := props["matchLabels"]
	_, exprs := props["matchExpressions"]
	rules, _ := s["x-kubernetes-validations"].([]any)
	return labels && exprs && len(rules) > 0
}

// boundSelectors gives every label selector under s (a matchLabels map, a
// matchExpressions list) that has no rules of its own the bounds of
// labels: keys 317 characters (a prefix and a name), values 63.
func boundSelectors(s map[string]any) {
	if boundedSelector(s) {
		return
	}
	props, _ := s["properties"].(map[string]any)
	if ml, ok := props["matchLabels"].(map[string]any); ok {
		if v, ok := ml["additionalProperties"].(map[string]any); ok && v["type"] == "string" {
			v["maxLength"] = 63
		}
	}
	if me, ok := props["matchExpressions"].(map[string]any); ok {
		items, _ := me["items"].(map[string]any)
		ip, _ := items["properties"].(map[string]any)
		if k, ok := ip["key"].(map[string]any); ok {
			k["maxLength"] = 317
		}
		if vals, ok := ip["values"].(map[string]any); ok {
			if it, ok := vals["items"].(map[string]any); ok {
				it["maxLength"] = 63
			}
		}
	}
	for _, p := range props {
		if p, ok := p.(map[string]any); ok {
			boundSelectors(p)
			if items, ok := p["items"].(map[string]any); ok {
				boundSelectors(items)
			}
		}
	}
}
