package controllerruntime_test

import (
	"testing"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
)

// audit ends a scenario while the Manager runs: every record on the
// subjects of ns must be the truth, their content checked with the Do of
// kinds (a declarative kind needs none).
func (r *rig) audit(t *testing.T, ns string, kinds ...audit.Kind) {
	t.Helper()
	bindingtest.Audit(t, r.env, bindingtest.AuditOptions{Namespace: ns, Kinds: kinds})
}
