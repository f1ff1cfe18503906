package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/policy"
)

var gvr = schema.GroupVersionResource{Group: "bindings.example.com", Version: "v1", Resource: "envbindings"}

// newGuard returns a Reconciler of the namespace guard over a fake
// clientset holding objs, with listers filled from the same objects.
func newGuard(t *testing.T, objs ...runtime.Object) (*policy.Reconciler, *fake.Clientset) {
	t.Helper()
	kube := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(kube, 0)
	vaps := f.Admissionregistration().V1().ValidatingAdmissionPolicies()
	vapbs := f.Admissionregistration().V1().ValidatingAdmissionPolicyBindings()
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			_ = vaps.Informer().GetIndexer().Add(o)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			_ = vapbs.Informer().GetIndexer().Add(o)
		}
	}
	objects, err := policy.NamespaceGuardObjects(policy.NamespaceGuardOptions{Resource: gvr}, kube, vaps.Lister(), vapbs.Lister(), "test")
	if err != nil {
		t.Fatal(err)
	}
	r, err := policy.NewReconciler(policy.Options{Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	return r, kube
}

func TestReconcilerProgramsHealsAndLeavesAlone(t *testing.T) {
	vap, vapb, err := policy.NamespaceGuard(policy.NamespaceGuardOptions{Resource: gvr})
	if err != nil {
		t.Fatal(err)
	}
	edited := vap.DeepCopy()
	edited.Spec.Validations[0].Expression = "true"
	edited.Labels["team"] = "ops"
	tests := []struct {
		name        string
		objs        []runtime.Object
		leader      bool
		wantActions []string
	}{
		{"follower writes nothing", nil, false, nil},
		{"missing objects are created", nil, true, []string{"create validatingadmissionpolicies", "create validatingadmissionpolicybindings"}},
		{"objects as desired send nothing", []runtime.Object{vap.DeepCopy(), vapb.DeepCopy()}, true, nil},
		{"an edited policy is restored", []runtime.Object{edited, vapb.DeepCopy()}, true, []string{"update validatingadmissionpolicies"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, kube := newGuard(t, tc.objs...)
			if tc.leader {
				r.Promote(func(string) {})
			}
			kube.ClearActions()
			for _, key := range r.Names() {
				if err := r.Reconcile(context.Background(), key); err != nil {
					t.Fatalf("Reconcile(%s): %v", key, err)
				}
			}
			var got []string
			for _, a := range kube.Actions() {
				got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
			}
			if diff := cmp.Diff(tc.wantActions, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if tc.name == "an edited policy is restored" {
				obj, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(context.Background(), vap.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(vap.Spec, obj.Spec); diff != "" {
					t.Errorf("restored spec (-want +got):\n%s", diff)
				}
				if obj.Labels["team"] != "ops" {
					t.Errorf("labels %v: the operator's label was dropped", obj.Labels)
				}
			}
		})
	}
}

func TestNamespaceGuardRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts policy.NamespaceGuardOptions
		want string
	}{
		{"no resource", policy.NamespaceGuardOptions{}, "Resource"},
		{"bad path", policy.NamespaceGuardOptions{Resource: gvr, SubjectPath: "spec.sub-ject"}, `SubjectPath "spec.sub-ject"`},
		{"CEL injection in path", policy.NamespaceGuardOptions{Resource: gvr, SubjectPath: "spec) || true || (x"}, "SubjectPath"},
		{"bad name", policy.NamespaceGuardOptions{Resource: gvr, Name: "Not A Name"}, `Name "Not A Name"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := policy.NamespaceGuard(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NamespaceGuard(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
			}
		})
	}
	if _, err := policy.NewReconciler(policy.Options{}); err == nil {
		t.Error("NewReconciler without objects: no error")
	}
}

func TestNamespaceGuardDefaults(t *testing.T) {
	vap, vapb, err := policy.NamespaceGuard(policy.NamespaceGuardOptions{Resource: gvr})
	if err != nil {
		t.Fatal(err)
	}
	if vap.Name != "namespace-guard.envbindings.bindings.example.com" || vapb.Spec.PolicyName != vap.Name {
		t.Errorf("names: policy %q, binding's policy %q", vap.Name, vapb.Spec.PolicyName)
	}
	want := "!has(object.spec) || !has(object.spec.subject) || !has(object.spec.subject.namespace) || object.spec.subject.namespace == '' || object.spec.subject.namespace == object.metadata.namespace"
	if got := vap.Spec.Validations[0].Expression; got != want {
		t.Errorf("expression:\n got %s\nwant %s", got, want)
	}
}
