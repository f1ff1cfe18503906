package bindingtest_test

import (
	"fmt"
	"testing"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

// The workloads CheckContract holds Do and Undo to: every shape bindkit
// binds, each also in a bare, a crowded and an edited layout.
func ExampleSubjects() {
	for _, s := range bindingtest.Subjects("default") {
		fmt.Println(s.Name)
	}
	// Output:
	// apps/v1 Deployment
	// apps/v1 StatefulSet
	// apps/v1 DaemonSet
	// apps/v1 ReplicaSet
	// batch/v1 Job
	// batch/v1 CronJob
	// v1 Pod
	// workloads.bindingtest.bindkit.dev/v1 Runner
}

// A kind's contract test, whole: its Example Binding, held to the
// promises of Do and Undo on every subject shape (and, with a control
// plane, on workloads as the kube-apiserver stores them).
func ExampleCheckContract() {
	_ = func(t *testing.T) { // func TestContract(t *testing.T)
		b := &v1alpha1.GithubBinding{}
		b.Namespace, b.Name = "default", "gh"
		b.Spec.Subject = tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
		b.Spec.Secret.Name = "token"
		bindingtest.CheckContract(t, b, bindingtest.ContractOptions{Reach: bindingtest.EveryContainerAndInitContainer})
	}
}
