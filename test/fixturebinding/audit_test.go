package fixturebinding_test

import (
	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/test/fixturebinding"
)

// audit ends a scenario: every record on the subjects of ns must be the
// truth, their content checked with both fixture kinds' Do.
func (r *rig) audit(ns string) {
	r.t.Helper()
	kinds := []audit.Kind{fixturebinding.AuditKind(fixturebinding.Kind), fixturebinding.AuditKind(fixturebinding.OtherKind)}
	bindingtest.Audit(r.t, r.env, bindingtest.AuditOptions{Namespace: ns, Kinds: kinds})
}
