package bindingtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestUnboundedNamesEveryFieldWithoutABound(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         []unboundedField
	}{{
		name: "bounded",
		schema: `{type: object, properties: {
			url: {type: string, maxLength: 10}, mode: {type: string, enum: [a, b]}, at: {type: string, format: date-time},
			port: {type: integer}, x: {x-kubernetes-int-or-string: true}, raw: {type: object, x-kubernetes-preserve-unknown-fields: true},
			list: {type: array, maxItems: 3, items: {type: string, maxLength: 5}},
			env: {type: object, maxProperties: 3, additionalProperties: {type: string, maxLength: 5}},
			selector: {type: object, x-kubernetes-validations: [{rule: "true"}], properties: {
				matchLabels: {type: object, additionalProperties: {type: string}},
				matchExpressions: {type: array, items: {type: object}}}}}}`,
	}, {
		name: "unbounded",
		schema: `{type: object, properties: {
			url: {type: string},
			list: {type: array, items: {type: string}},
			env: {type: object, additionalProperties: {type: string}},
			selector: {type: object, properties: {
				matchLabels: {type: object, additionalProperties: {type: string, maxLength: 63}, maxProperties: 3},
				matchExpressions: {type: array, maxItems: 2, items: {type: object}}}}}}`,
		want: []unboundedField{
			{"spec.env", "+kubebuilder:validation:MaxProperties=N"},
			{"spec.env[*]", "a value type of its own, with +kubebuilder:validation:MaxLength=N or Enum"},
			{"spec.list", "+kubebuilder:validation:MaxItems=N"},
			{"spec.list[*]", "+kubebuilder:validation:items:MaxLength=N or Enum"},
			{"spec.url", "+kubebuilder:validation:MaxLength=N or Enum"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var s map[string]any
			if err := yaml.Unmarshal([]byte(tc.schema), &s); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, unbounded("spec", s), cmp.AllowUnexported(unboundedField{})); diff != "" {
				t.Errorf("unbounded (-want +got):\n%s", diff)
			}
		})
	}
}
