package tracker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestReferenceValidate(t *testing.T) {
	sel := func(ml map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: ml, MatchExpressions: exprs}
	}
	tests := []struct {
		name string
		ref  Reference
		// wantErrs are fragments that must each appear in the error; none
		// means the reference is valid.
		wantErrs []string
	}{{
		name: "by name",
		ref:  Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
	}, {
		name: "by selector, core group",
		ref:  Reference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Selector: sel(map[string]string{"app": "web"})},
	}, {
		name: "empty selector selects everything",
		ref:  Reference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Selector: &metav1.LabelSelector{}},
	}, {
		name:     "everything missing",
		ref:      Reference{},
		wantErrs: []string{"apiVersion is required", "kind is required", "one of name and selector is required"},
	}, {
		name:     "apiVersion does not parse",
		ref:      Reference{APIVersion: "a/b/c", Kind: "Deployment", Namespace: "default", Name: "web"},
		wantErrs: []string{`apiVersion "a/b/c"`},
	}, {
		name:     "name and selector",
		ref:      Reference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "web", Selector: sel(map[string]string{"app": "web"})},
		wantErrs: []string{"mutually exclusive"},
	}, {
		name: "In without values",
		ref: Reference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Selector: sel(nil,
			metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpIn})},
		wantErrs: []string{"selector: "},
	}, {
		name: "unknown operator",
		ref: Reference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Selector: sel(nil,
			metav1.LabelSelectorRequirement{Key: "app", Operator: "Near", Values: []string{"x"}})},
		wantErrs: []string{"selector: ", "Near"},
	}, {
		name:     "invalid label value",
		ref:      Reference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Selector: sel(map[string]string{"app": "not valid!"})},
		wantErrs: []string{"selector: "},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ref.Validate()
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.wantErrs)
			}
			var missing []string
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					missing = append(missing, want)
				}
			}
			if diff := cmp.Diff([]string(nil), missing); diff != "" {
				t.Errorf("Validate() = %q lacks fragments (-want +got):\n%s", err, diff)
			}
		})
		t.Run(tc.name+"/Parse agrees", func(t *testing.T) {
			sel, err := tc.ref.Parse()
			if got, want := fmt.Sprint(err), fmt.Sprint(tc.ref.Validate()); got != want {
				t.Fatalf("Parse() error = %s, want Validate's %s", got, want)
			}
			if err != nil {
				return
			}
			want, _ := tc.ref.LabelSelector()
			if sel.String() != want.String() || sel.Empty() != want.Empty() {
				t.Errorf("Parse() selector = %q, want LabelSelector's %q", sel, want)
			}
		})
	}
}

func TestReferenceAccessors(t *testing.T) {
	byName := Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}
	bySelector := Reference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Selector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"app": "web"},
	}}
	type result struct {
		String   string
		GVK      schema.GroupVersionKind
		Selector string
		Nothing  bool
	}
	get := func(r Reference) result {
		gvk, err := r.GroupVersionKind()
		if err != nil {
			t.Fatalf("%s: GroupVersionKind: %v", r, err)
		}
		sel, err := r.LabelSelector()
		if err != nil {
			t.Fatalf("%s: LabelSelector: %v", r, err)
		}
		_, selectable := sel.Requirements()
		return result{String: r.String(), GVK: gvk, Selector: sel.String(), Nothing: !selectable}
	}
	got := []result{get(byName), get(bySelector)}
	want := []result{{
		String:  "apps/v1 Deployment default/web",
		GVK:     schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Nothing: true,
	}, {
		String:   "v1 Pod ns/{app=web}",
		GVK:      schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Selector: "app=web",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accessors (-want +got):\n%s", diff)
	}
}

func TestReferenceDeepCopySharesNothing(t *testing.T) {
	orig := &Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	cp := orig.DeepCopy()
	if diff := cmp.Diff(orig, cp); diff != "" {
		t.Fatalf("copy differs (-orig +copy):\n%s", diff)
	}
	cp.Selector.MatchLabels["app"] = "changed"
	if orig.Selector.MatchLabels["app"] != "web" {
		t.Error("changing the copy's selector changed the original")
	}
	if (*Reference)(nil).DeepCopy() != nil {
		t.Error("DeepCopy of nil is not nil")
	}
}
