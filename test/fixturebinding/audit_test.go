package fixturebinding_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/fixturebinding"
)

// audit ends a scenario: every record on the subjects of ns must be the
// truth, their content checked with both fixture kinds' Do.
func (r *rig) audit(ns string) {
	r.t.Helper()
	var kinds []audit.Kind
	for _, kind := range []string{fixturebinding.Kind, fixturebinding.OtherKind} {
		kinds = append(kinds, audit.Kind{Resource: fixturebinding.GVR(kind), Decode: decodeFixture})
	}
	bindingtest.Audit(r.t, r.env, bindingtest.AuditOptions{Namespace: ns, Kinds: kinds})
}

// decodeFixture turns a fixture Binding as the API server returns it into
// the Bindable the controller binds with (its Kind, which Do reads,
// included).
func decodeFixture(u *unstructured.Unstructured) (psbinding.Bindable, error) {
	b := &fixturebinding.Binding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return b, nil
}
