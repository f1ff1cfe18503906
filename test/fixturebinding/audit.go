package fixturebinding

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/psbinding"
)

// AuditKind lets the audit run the Do of kind's Bindings (Kind or
// OtherKind), so that it checks subjects' content against their records.
func AuditKind(kind string) audit.Kind {
	return audit.Kind{Resource: GVR(kind), Decode: decode}
}

// decode turns a fixture Binding as the API server returns it into the
// Bindable the controller binds with (its Kind, which Do reads, included).
func decode(u *unstructured.Unstructured) (psbinding.Bindable, error) {
	b := &Binding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return b, nil
}
