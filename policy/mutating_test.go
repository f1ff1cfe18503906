package policy_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/policy"
)

func TestMutatingPolicyRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts policy.MutatingPolicyOptions
		want string
	}{
		{"no kind", policy.MutatingPolicyOptions{Resource: gvr}, "Kind"},
		{"CEL in declared path", policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding", DeclaredPath: "status.x || true"}, "DeclaredPath"},
		{"CEL in shape path", policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding", Shapes: []policy.WorkloadShape{{"apps", "deployments", "spec.template['x']"}}}, "Shapes[0].PodSpecPath"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := policy.MutatingPolicy(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("MutatingPolicy: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	m, b, err := policy.MutatingPolicy(policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "bind.envbindings.bindings.example.com" || b.Spec.PolicyName != m.Name || len(m.Spec.Mutations) != len(policy.DefaultWorkloadShapes()) {
		t.Errorf("policy %s (%d mutations), binding of %s", m.Name, len(m.Spec.Mutations), b.Spec.PolicyName)
	}
}

func TestMutatingPoliciesServed(t *testing.T) {
	kube := fake.NewClientset()
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "mutatingwebhookconfigurations"}}}}
	if served, err := policy.MutatingPoliciesServed(kube.Discovery()); err != nil || served {
		t.Errorf("without the resources: served %v, err %v", served, err)
	}
	kube.Resources[0].APIResources = append(kube.Resources[0].APIResources, metav1.APIResource{Name: "mutatingadmissionpolicies"}, metav1.APIResource{Name: "mutatingadmissionpolicybindings"})
	if served, err := policy.MutatingPoliciesServed(kube.Discovery()); err != nil || !served {
		t.Errorf("with the resources: served %v, err %v", served, err)
	}
}
