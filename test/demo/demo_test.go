package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

// The demo runs on a control plane with workloads, as `make demo` does, so
// that it shows the bound Deployment's pods.
var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{"../../" + demo.CRDPath}, Workloads: true}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

// TestGithubBindingEndToEndWithRealAPIServer runs the githubbinding
// controller as its own process against the real kube-apiserver, which
// calls its webhook over TLS: the reconcile path binds an existing
// Deployment, the admission path binds a new one, deletion unbinds, and
// SIGTERM ends the process with exit code 0.
func TestGithubBindingEndToEndWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	var out bytes.Buffer
	err := demo.Run(context.Background(), &out, env, demo.Options{RepoRoot: "../.."})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"the reconciler bound Deployment hello",
		"came back from its create already bound",
		"Deployment hello is unbound",
		"with the binding's volume github-binding (volumes: [github-binding])",
		"without the binding's volume",
		"controller stopped with SIGTERM and exited 0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The demo ends with its Binding deleted and the controller stopped:
	// no record may be left on its subjects.
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: demo.DemoNamespace, Kinds: []audit.Kind{faults.GithubBindingKind}})
}
