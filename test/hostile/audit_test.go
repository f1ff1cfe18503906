package hostile_test

import (
	"testing"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

// auditTestNamespace ends a scenario while the controller still runs: every
// record on the subjects of testNamespace, which the tests share, must be
// the truth, their content checked with GithubBindings' Do.
func auditTestNamespace(t *testing.T, env *testenv.Environment) {
	t.Helper()
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: testNamespace, Kinds: []audit.Kind{faults.GithubBindingKind}})
}
