package policy_test

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/policy"
)

// TestRemoveMutatingPolicy checks that both objects go, and that a second
// call, with nothing left, is no error and removes nothing.
func TestRemoveMutatingPolicy(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "bind.sinks.example.com"}
	kube := fake.NewClientset(&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: meta}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: meta})
	for i, want := range []bool{true, false} {
		removed, err := policy.RemoveMutatingPolicy(t.Context(), kube, meta.Name)
		if err != nil || removed != want {
			t.Errorf("call %d: RemoveMutatingPolicy = %v, %v; want %v, nil", i+1, removed, err, want)
		}
	}
	left, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("policies left: %v, %v", left, err)
	}
}
