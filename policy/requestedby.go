package policy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
)

// RequestedByAnnotation records, on a Binding, the user who last created
// it or changed its spec, as the kube-apiserver authenticated them
// (request.userInfo.username): the author whose authority the Binding
// carries. The requested-by policy writes it; a user's own value is
// overwritten, and a write that leaves the spec alone cannot change it.
// A Binding without it predates the policy (or was written where the
// policy was not served).
const RequestedByAnnotation = "bindings.bindkit.dev/requested-by"

// RequestedByName is the default name of a kind's requested-by policy and
// its binding: "requested-by." followed by its group resource.
func RequestedByName(gr schema.GroupResource) string { return "requested-by." + gr.String() }

// RequestedBy returns the MutatingAdmissionPolicy and its binding that
// keep RequestedByAnnotation on the Bindings of resource gvr true: at a
// create, and at an update that changes the spec, it is set to the
// requesting user's name; at any other update it keeps the value the
// Binding had (or stays absent), whatever the request carried. name, if
// empty, is RequestedByName(gvr.GroupResource()).
//
// Its failurePolicy is Fail: a Binding whose author cannot be recorded is
// not written.
func RequestedBy(gvr schema.GroupVersionResource, name string) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	if gvr.Group == "" || gvr.Version == "" || gvr.Resource == "" {
		return nil, nil, fmt.Errorf("policy: RequestedBy resource %q: group, version and resource are all required", gvr.String())
	}
	if name == "" {
		name = RequestedByName(gvr.GroupResource())
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, nil, fmt.Errorf("policy: RequestedBy name %q: %s", name, strings.Join(msgs, "; "))
	}
	key := celString(RequestedByAnnotation)
	has := func(o string) string {
		return "(has(" + o + ".metadata.annotations) && " + key + " in " + o + ".metadata.annotations)"
	}
	value := func(o string) string { return "(" + has(o) + " ? " + o + ".metadata.annotations[" + key + "] : '')" }
	fail, never := admissionregistrationv1.Fail, admissionregistrationv1.NeverReinvocationPolicy
	labels := map[string]string{ManagedByLabel: "bindkit"}
	m := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: bindingWrites(gvr),
			Variables: []admissionregistrationv1.Variable{
				{Name: "specChanged", Expression: specChanged},
				{Name: "want", Expression: "variables.specChanged ? request.userInfo.username : " + value("oldObject")},
				{Name: "recorded", Expression: has("object")},
			},
			// Only a write that changes the spec or the record costs a
			// mutation: the controller's own writes pass untouched.
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "record-changes",
				Expression: specChanged + " || " + value("object") + " != " + value("oldObject"),
			}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: "variables.want == '' ? " +
					"(variables.recorded ? [JSONPatch{op: 'remove', path: '/metadata/annotations/' + jsonpatch.escapeKey(" + key + ")}] : []) : " +
					"(has(object.metadata.annotations) ? [JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey(" + key + "), value: variables.want}] : " +
					"[JSONPatch{op: 'add', path: '/metadata/annotations', value: {" + key + ": variables.want}}])"},
			}},
			FailurePolicy:      &fail,
			ReinvocationPolicy: never,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	return m, binding, nil
}

// RequestedByObjects returns the requested-by policy of gvr's Bindings as
// Objects for a Reconciler, reading through the given listers (informers
// limited to the policy's name) and writing with kube. Call it only where
// MutatingPoliciesServed says so.
func RequestedByObjects(gvr schema.GroupVersionResource, kube kubernetes.Interface, policies admissionlisters.MutatingAdmissionPolicyLister, bindings admissionlisters.MutatingAdmissionPolicyBindingLister, fieldManager string) ([]Object, error) {
	m, binding, err := RequestedBy(gvr, "")
	if err != nil {
		return nil, err
	}
	type mapT = admissionregistrationv1.MutatingAdmissionPolicy
	type bindingT = admissionregistrationv1.MutatingAdmissionPolicyBinding
	return []Object{
		&Typed[mapT, *mapT]{
			Desired: m, Get: policies.Get, Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicies(),
			Spec:         func(o *mapT) any { return &o.Spec },
			SetSpec:      func(dst, src *mapT) { dst.Spec = src.Spec },
			Kind:         "MutatingAdmissionPolicy",
			FieldManager: fieldManager,
		},
		&keyed[bindingT, *bindingT]{Typed[bindingT, *bindingT]{
			Desired: binding, Get: bindings.Get, Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings(),
			Spec:         func(o *bindingT) any { return &o.Spec },
			SetSpec:      func(dst, src *bindingT) { dst.Spec = src.Spec },
			Kind:         "MutatingAdmissionPolicyBinding",
			FieldManager: fieldManager,
		}},
	}, nil
}

// keyed is a policy's binding under a Reconciler key of its own
// (BindingKeyPrefix and its name): a policy and its binding share a name,
// and a Reconciler's keys are names.
type keyed[T any, PT interface {
	*T
	metav1.Object
}] struct {
	Typed[T, PT]
}

// Name implements Object.
func (k *keyed[T, PT]) Name() string { return BindingKeyPrefix + k.Desired.GetName() }
