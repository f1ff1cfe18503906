package e2e_test

import (
	"testing"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

// auditNamespace runs the audit over ns, with GithubBindings' Do, while the
// controller runs: every record must be the truth.
func auditNamespace(t *testing.T, env *testenv.Environment, ns string) {
	t.Helper()
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns, Kinds: []audit.Kind{faults.GithubBindingKind}})
}
