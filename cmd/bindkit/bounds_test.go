package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestBoundSpec: every string, list and map of the spec gets a bound
// unless it has one (or an enum, a format, or is free-form); label
// selectors get labels' bounds, but for one with rules of its own
// (tracker.Reference's), left as controller-gen wrote it; the status is
// left alone.
func TestBoundSpec(t *testing.T) {
	in := `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties:
              free: {type: string}
              short: {type: string, maxLength: 10}
              mode: {type: string, enum: [a, b]}
              when: {type: string, format: date-time}
              list: {type: array, items: {type: string}}
              tags: {type: object, additionalProperties: {type: string}}
              raw: {type: object, x-kubernetes-preserve-unknown-fields: true}
              subject:
                properties:
                  selector:
                    x-kubernetes-validations:
                    - rule: "!has(self.matchLabels) || self.matchLabels.size() <= 64"
                    properties:
                      matchLabels: {type: object, additionalProperties: {type: string}}
                      matchExpressions:
                        type: array
                        items:
                          properties:
                            key: {type: string}
                            values: {type: array, items: {type: string}}
                          type: object
                    type: object
                type: object
              other:
                properties:
                  selector:
                    properties:
                      matchLabels: {type: object, additionalProperties: {type: string}}
                      matchExpressions:
                        type: array
                        items:
                          properties:
                            key: {type: string}
                            values: {type: array, items: {type: string}}
                          type: object
                    type: object
                type: object
            type: object
          status:
            properties:
              message: {type: string}
            type: object
        type: object
`
	out, err := boundSpec([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "---\n") {
		t.Errorf("output does not start with ---: %q", out[:10])
	}
	var crd map[string]any
	if err := yaml.Unmarshal(out[4:], &crd); err != nil {
		t.Fatal(err)
	}
	at := func(path ...string) any {
		var cur any = crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"]
		for _, p := range path {
			cur = cur.(map[string]any)[p]
		}
		return cur
	}
	spec := func(path ...string) any { return at(append([]string{"properties", "spec", "properties"}, path...)...) }
	for _, tc := range []struct {
		got  any
		want any
	}{
		{spec("free", "maxLength"), float64(DefaultMaxLength)},
		{spec("short", "maxLength"), float64(10)},
		{spec("mode", "maxLength"), nil},
		{spec("when", "maxLength"), nil},
		{spec("list", "maxItems"), float64(DefaultMaxItems)},
		{spec("list", "items", "maxLength"), float64(DefaultMaxLength)},
		{spec("tags", "maxProperties"), float64(DefaultMaxProperties)},
		{spec("raw", "maxProperties"), nil},
		{spec("other", "properties", "selector", "properties", "matchLabels", "additionalProperties", "maxLength"), float64(63)},
		{spec("other", "properties", "selector", "properties", "matchExpressions", "items", "properties", "key", "maxLength"), float64(317)},
		{spec("other", "properties", "selector", "properties", "matchExpressions", "items", "properties", "values", "items", "maxLength"), float64(63)},
		// A selector with rules of its own (tracker.Reference's) is
		// bounded by them, as controller-gen alone writes it.
		{spec("subject", "properties", "selector", "properties", "matchLabels", "maxProperties"), nil},
		{spec("subject", "properties", "selector", "properties", "matchLabels", "additionalProperties", "maxLength"), nil},
		{spec("subject", "properties", "selector", "properties", "matchExpressions", "maxItems"), nil},
		{spec("subject", "properties", "selector", "properties", "matchExpressions", "items", "properties", "key", "maxLength"), nil},
		{at("properties", "status", "properties", "message", "maxLength"), nil},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}
