package policy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/policy"
)

// TestMutatingPolicyBinding checks what a Binding's binding says: its
// name, params, the namespace it is kept to, the objects it lets through,
// and a clear error for a selector the kube-apiserver would refuse.
func TestMutatingPolicyBinding(t *testing.T) {
	opts := policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding"}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	long := strings.Repeat("n", 240)
	tests := []struct {
		name     string
		ref      policy.BindingRef
		wantName string
		wantObj  *metav1.LabelSelector
		wantErr  string
	}{
		{"by selector", policy.BindingRef{Namespace: "shop", Name: "env", Selector: web}, "bind.envbindings.bindings.example.com.shop.env", web, ""},
		{"by name: every object of the namespace", policy.BindingRef{Namespace: "shop", Name: "env"}, "bind.envbindings.bindings.example.com.shop.env", &metav1.LabelSelector{}, ""},
		{"empty selector", policy.BindingRef{Namespace: "shop", Name: "env", Selector: &metav1.LabelSelector{}}, "bind.envbindings.bindings.example.com.shop.env", &metav1.LabelSelector{}, ""},
		{"a name too long is hashed", policy.BindingRef{Namespace: "shop", Name: long}, "bind.envbindings.bindings.example.com.", nil, ""},
		{"invalid selector", policy.BindingRef{Namespace: "shop", Name: "env", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a b"}}}, "", nil, "EnvBinding shop/env: spec.subject.selector.matchLabels"},
		{"no namespace", policy.BindingRef{Name: "env"}, "", nil, "a namespace and a name are required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := policy.MutatingPolicyBinding(opts, tc.ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(b.Name, tc.wantName) || len(b.Name) > 253 {
				t.Errorf("name %q (%d bytes), want %q (at most 253)", b.Name, len(b.Name), tc.wantName)
			}
			if p := b.Spec.ParamRef; p.Name != tc.ref.Name || p.Namespace != tc.ref.Namespace || p.Selector != nil {
				t.Errorf("paramRef %+v, want the Binding by name", p)
			}
			if tc.wantObj != nil {
				if diff := cmp.Diff(tc.wantObj, b.Spec.MatchResources.ObjectSelector); diff != "" {
					t.Errorf("objectSelector (-want +got):\n%s", diff)
				}
			}
			if got := b.Labels[policy.PolicyLabel]; got != policy.PolicyLabelValue("bind.envbindings.bindings.example.com") {
				t.Errorf("policy label %q", got)
			}
		})
	}
}

// TestBindingSet checks that the set creates the bindings of new
// Bindings, restores an edited one, deletes those of Bindings gone and the
// one an earlier bindkit named after the policy, leaves other policies'
// bindings alone, and skips a Binding whose binding cannot be built.
func TestBindingSet(t *testing.T) {
	opts := policy.MutatingPolicyOptions{Resource: gvr, Kind: "EnvBinding"}
	bindingOf := func(ns, name string) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
		b, err := policy.MutatingPolicyBinding(opts, policy.BindingRef{Namespace: ns, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kept, gone := bindingOf("shop", "kept"), bindingOf("shop", "gone")
	edited := bindingOf("shop", "edited")
	edited.Spec.ParamRef.Name = "someone-else"
	legacy := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind.envbindings.bindings.example.com"}}
	other := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "someone.elses", Labels: map[string]string{policy.PolicyLabel: "other"}}}
	objs := []runtime.Object{kept, gone, edited, legacy, other}
	kube := fake.NewClientset(objs...)
	lister := informers.NewSharedInformerFactory(kube, 0).Admissionregistration().V1().MutatingAdmissionPolicyBindings()
	for _, o := range objs {
		if err := lister.Informer().GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	var written []string
	set := &policy.BindingSet{
		Options: opts, Lister: lister.Lister(), Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings(),
		Refs: func() ([]policy.BindingRef, error) {
			return []policy.BindingRef{{Namespace: "shop", Name: "kept"}, {Namespace: "shop", Name: "edited"}, {Namespace: "shop", Name: "new"},
				{Namespace: "shop", Name: "bad", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a b"}}}}, nil
		},
		Written: func(r policy.BindingRef) { written = append(written, r.Name) },
	}
	if set.Name() != policy.BindingKeyPrefix+"bind.envbindings.bindings.example.com" {
		t.Errorf("key %q", set.Name())
	}
	action, err := set.Ensure(t.Context())
	if err != nil || action != policy.Created {
		t.Fatalf("Ensure = %v, %v; want created", action, err)
	}
	list, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
		if b.Name == edited.Name && b.Spec.ParamRef.Name != "edited" {
			t.Errorf("edited binding not restored: paramRef %+v", b.Spec.ParamRef)
		}
	}
	slices.Sort(names)
	want := []string{"bind.envbindings.bindings.example.com.shop.edited", "bind.envbindings.bindings.example.com.shop.kept", "bind.envbindings.bindings.example.com.shop.new", "someone.elses"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	slices.Sort(written)
	if diff := cmp.Diff([]string{"edited", "new"}, written); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
}
