package envtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateNamespace creates a namespace named prefix plus a random suffix, for
// one test, and deletes it when the test ends, so tests can share the
// control plane and run in parallel. Without kube-controller-manager
// (Options.ControllerManager) a deleted namespace never finishes
// terminating, but it no longer accepts new objects.
func (e *Environment) CreateNamespace(t testing.TB, prefix string) string {
	t.Helper()
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatalf("kube client: %v", err)
	}
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s*: %v", prefix, err)
	}
	t.Cleanup(func() {
		kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}
