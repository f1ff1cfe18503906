package policy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

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
		{"CEL in spec path", policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding", SpecPath: "spec.declare) || (true"}, "SpecPath"},
		{"CEL in shape path", policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding", Shapes: []policy.WorkloadShape{{"apps", "deployments", "spec.template['x']"}}}, "Shapes[0].PodSpecPath"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.MutatingPolicy(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("MutatingPolicy: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	opts := policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding"}
	m, err := policy.MutatingPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.MutatingPolicyBinding(opts, policy.BindingRef{Namespace: "ns", Name: "env"})
	if err != nil {
		t.Fatal(err)
	}
	// One mutation for every shape and the bound annotation.
	if m.Name != "bind.envbindings.bindings.example.com" || b.Spec.PolicyName != m.Name || len(m.Spec.Mutations) != 1 {
		t.Errorf("policy %s (%d mutations), binding of %s", m.Name, len(m.Spec.Mutations), b.Spec.PolicyName)
	}
}

// TestMutatingPolicyNamespaceSelector checks where the policy and its
// bindings let it act: as the webhook, never in the excluded namespaces, and by the
// namespace opt-out or opt-in labels.
func TestMutatingPolicyNamespaceSelector(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "bindings.example.com", Version: "v1", Resource: "envbindings"}
	notExcluded := metav1.LabelSelectorRequirement{Key: policy.ExcludeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}
	for _, tc := range []struct {
		name string
		opts policy.MutatingPolicyOptions
		want *metav1.LabelSelector
	}{
		{"defaults", policy.MutatingPolicyOptions{}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded}}},
		{"excluded namespaces, sorted, once each", policy.MutatingPolicyOptions{ExcludedNamespaces: []string{"kube-system", "bindkit-system", "kube-system"}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"bindkit-system", "kube-system"}}, notExcluded}}},
		{"inclusion", policy.MutatingPolicyOptions{Inclusion: true},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: policy.IncludeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Resource, tc.opts.Kind = gvr, "EnvBinding"
			m, err := policy.MutatingPolicy(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m.Spec.MatchConstraints.NamespaceSelector); diff != "" {
				t.Errorf("policy's namespaceSelector (-want +got):\n%s", diff)
			}
			// Every binding is kept to its Binding's namespace, by one
			// label: the kube-apiserver parses a binding's selectors on
			// every request.
			b, err := policy.MutatingPolicyBinding(tc.opts, policy.BindingRef{Namespace: "ns", Name: "env"})
			if err != nil {
				t.Fatal(err)
			}
			want := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ns"}}
			if diff := cmp.Diff(want, b.Spec.MatchResources.NamespaceSelector); diff != "" {
				t.Errorf("binding's namespaceSelector (-want +got):\n%s", diff)
			}
		})
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
