package faults

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
)

// GithubBindingKind lets the audit run a GithubBinding's Do, so that it
// checks the subjects' content against their records, not only the
// records.
var GithubBindingKind = audit.Kind{Resource: v1alpha1.GroupVersionResource(), Decode: DecodeGithubBinding}

// DecodeGithubBinding turns a GithubBinding as the API server returns it
// into the Bindable the controller binds with.
func DecodeGithubBinding(u *unstructured.Unstructured) (psbinding.Bindable, error) {
	b := &v1alpha1.GithubBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("GithubBinding %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return b, nil
}

// Audit ends a scenario: it runs bindingtest.Audit over ns, with
// GithubBindings' Do, and fails the test with every record that is not
// the truth. Call it while the controller still runs.
func (h *Harness) Audit(ns string) {
	h.T.Helper()
	bindingtest.Audit(h.T, h.Env, bindingtest.AuditOptions{Namespace: ns, Kinds: []audit.Kind{GithubBindingKind}})
}
