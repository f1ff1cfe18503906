package v1alpha1_test

import (
	"path/filepath"
	"testing"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/tracker"

	bindingsv1alpha1 "github.com/bindkit/bindkit/controllerruntime/examples/githubbinding/api/v1alpha1"
)

// TestGithubBindingContract checks the Do and Undo of bindingsv1alpha1.Example on a
// workload of every shape bindkit binds, in several layouts, without a
// server: Do and Undo leave their Binding alone; Do is deterministic (a
// second later too), keeps what the workload has, reaches every container
// and is idempotent; Undo leaves an unbound workload alone and restores a
// bound one. internal/controller's suite binds real Deployments with it.
func TestGithubBindingContract(t *testing.T) {
	b := bindingsv1alpha1.Example("contract", "example", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"})
	bindingtest.CheckContract(t, b, bindingtest.ContractOptions{
		// What Do adds to one container (env vars, envFrom, mounts) it adds
		// to every one. Widen it to bindingtest.EveryContainerAndInitContainer
		// when Do binds init containers too; narrow it, on purpose, to
		// bindingtest.ReachUnstated only for a Do meant for some containers.
		Reach: bindingtest.EveryContainerAndInitContainer,
	})
}

// TestGithubBindingSpecIsBounded checks that the CRD make manifests writes
// bounds every string, list and map of the spec (their markers, on the
// fields of GithubBindingSpec), as bindkit needs of a Binding.
func TestGithubBindingSpecIsBounded(t *testing.T) {
	bindingtest.CheckBounded(t, filepath.Join("..", "..", "config", "crd", "bases/bindings.bindkit.dev_githubbindings.yaml"))
}
