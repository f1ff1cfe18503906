package tracker

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Reference names the objects an observer depends on: one object by Name,
// or every object of the kind in Namespace whose labels match Selector.
// Exactly one of Name and Selector is set. The tracker does not know which
// kinds are namespaced: a Binding's subject reference gets its namespace
// from the Binding (see psbinding) before it is tracked.
//
// The markers below give the schema of every CRD generated from a Go type
// that holds a Reference (controller-gen, as `bindkit generate` runs it)
// what Validate checks: apiVersion and kind set, exactly one of name and
// selector, selector operators that exist. The namespace is not constrained there: bindkit refuses a
// Binding whose subject leaves the Binding's namespace itself, on both
// paths, with a condition that names both namespaces (see psbinding),
// whatever the CRD says.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="exactly one of name and selector is required"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="selector operators are In, NotIn, Exists and DoesNotExist"
type Reference struct {
	// APIVersion is the group/version of the referenced kind, e.g. "apps/v1".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// Kind is the referenced kind, e.g. "Deployment".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Namespace holds the referenced objects; empty for a cluster-scoped
	// kind (a Namespace, say). A Binding's subject is in the Binding's own
	// namespace: leave it empty, or name that one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name names one object.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// The selector's bounds are rules on the field, not maxLength and
	// maxItems inside it: metav1.LabelSelector carries no markers, and
	// rules here reach every CRD that holds a Reference whichever
	// generator writes it (kubebuilder's make manifests, bindkit
	// generate). The lengths of matchExpressions' values are left to
	// Validate: a rule over them estimates beyond the kube-apiserver's
	// budget.

	// Selector selects objects by label: at most 64 labels (keys of at
	// most 317 characters, values of at most 63) and 64 expressions of at
	// most 64 values.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.size() <= 64",message="at most 64 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, k.size() <= 317 && self.matchLabels[k].size() <= 63)",message="matchLabels keys have at most 317 characters, values at most 63"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.size() <= 64",message="at most 64 matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.key.size() <= 317 && (!has(e.values) || e.values.size() <= 64))",message="matchExpressions keys have at most 317 characters and at most 64 values"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// GroupVersionKind returns the referenced kind, or an error when APIVersion
// does not parse.
func (r Reference) GroupVersionKind() (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", r.APIVersion, err)
	}
	return gv.WithKind(r.Kind), nil
}

// Validate reports every problem with r, joined, or nil when r is usable.
func (r Reference) Validate() error {
	_, err := r.validate()
	return err
}

// Parse is Validate and LabelSelector in one, parsing the selector once:
// what a caller that files many references (an admission index rebuilt
// on every Binding change) uses.
func (r Reference) Parse() (labels.Selector, error) {
	sel, err := r.validate()
	if err != nil {
		return nil, err
	}
	if sel == nil {
		return labels.Nothing(), nil
	}
	return sel, nil
}

// validate checks r and returns its parsed Selector (nil when r names one
// object).
func (r Reference) validate() (labels.Selector, error) {
	var errs []error
	if r.APIVersion == "" {
		errs = append(errs, errors.New("apiVersion is required"))
	} else if _, err := r.GroupVersionKind(); err != nil {
		errs = append(errs, err)
	}
	if r.Kind == "" {
		errs = append(errs, errors.New("kind is required"))
	}
	var sel labels.Selector
	switch {
	case r.Name == "" && r.Selector == nil:
		errs = append(errs, errors.New("one of name and selector is required"))
	case r.Name != "" && r.Selector != nil:
		errs = append(errs, errors.New("name and selector are mutually exclusive"))
	case r.Selector != nil:
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(r.Selector); err != nil {
			errs = append(errs, fmt.Errorf("selector: %w", err))
		}
	}
	return sel, errors.Join(errs...)
}

// LabelSelector returns Selector parsed, or labels.Nothing when r names one
// object by Name.
func (r Reference) LabelSelector() (labels.Selector, error) {
	if r.Selector == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(r.Selector)
}

// String formats r for logs and errors: "apps/v1 Deployment default/web" or
// "apps/v1 Deployment default/{app=web}".
func (r Reference) String() string {
	target := r.Name
	if r.Selector != nil {
		target = "{" + metav1.FormatLabelSelector(r.Selector) + "}"
	}
	return fmt.Sprintf("%s %s %s/%s", r.APIVersion, r.Kind, r.Namespace, target)
}

// DeepCopyInto copies r into out, sharing no memory. It lets API types that
// embed a Reference (a Binding's spec.subject) use generated deep copies.
func (r *Reference) DeepCopyInto(out *Reference) {
	*out = *r
	if r.Selector != nil {
		out.Selector = r.Selector.DeepCopy()
	}
}

// DeepCopy returns a copy of r that shares no memory with it.
func (r *Reference) DeepCopy() *Reference {
	if r == nil {
		return nil
	}
	out := new(Reference)
	r.DeepCopyInto(out)
	return out
}
