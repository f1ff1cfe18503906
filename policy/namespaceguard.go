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

// DefaultSubjectPath is where a Binding's subject reference lives, as in
// knative's Bindings and bindkit's examples.
const DefaultSubjectPath = "spec.subject"

// ManagedByLabel marks the objects this package programs.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// NamespaceGuardOptions describe the Binding kind a namespace guard
// protects. Resource is required; the zero SubjectPath is
// DefaultSubjectPath and the zero Name is NamespaceGuardName(Resource).
type NamespaceGuardOptions struct {
	// Resource is the Binding kind's resource (group, version, resource).
	Resource schema.GroupVersionResource
	// SubjectPath is the dotted path of the subject reference in a
	// Binding, whose namespace field is checked.
	SubjectPath string
	// Name names both the policy and its binding.
	Name string
}

// NamespaceGuardName is the default name of the namespace guard of a
// Binding kind: "namespace-guard." followed by its group resource, like
// namespace-guard.githubbindings.bindings.bindkit.dev.
func NamespaceGuardName(gr schema.GroupResource) string {
	return "namespace-guard." + gr.String()
}

// NamespaceGuard returns the ValidatingAdmissionPolicy and its binding that
// refuse, at create and update, a Binding whose subject names a namespace
// other than the Binding's own. The message names both namespaces:
//
//	subject names namespace other, but a Binding binds subjects only in its own namespace (default)
//
// Its failurePolicy is Ignore: a policy that cannot evaluate (a CRD without
// the subject field) must not stop every Binding from being created; the
// reconciler still refuses such a Binding on its Ready condition.
func NamespaceGuard(opts NamespaceGuardOptions) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	gvr := opts.Resource
	if gvr.Group == "" || gvr.Version == "" || gvr.Resource == "" {
		return nil, nil, fmt.Errorf("policy: NamespaceGuardOptions.Resource %q: group, version and resource are all required", gvr.String())
	}
	name := opts.Name
	if name == "" {
		name = NamespaceGuardName(gvr.GroupResource())
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, nil, fmt.Errorf("policy: NamespaceGuardOptions.Name %q: %s", name, strings.Join(msgs, "; "))
	}
	path := opts.SubjectPath
	if path == "" {
		path = DefaultSubjectPath
	}
	fields := strings.Split(path, ".")
	for i, f := range fields {
		if msgs := validation.IsCIdentifier(f); len(msgs) > 0 {
			return nil, nil, fmt.Errorf("policy: NamespaceGuardOptions.SubjectPath %q: field %d %q: %s", path, i, f, strings.Join(msgs, "; "))
		}
	}
	subject := "object." + path
	// has() on each step: a Binding without a subject, or a subject
	// without a namespace (its own), passes.
	var guards []string
	for i := range fields {
		guards = append(guards, "!has(object."+strings.Join(fields[:i+1], ".")+")")
	}
	guards = append(guards, "!has("+subject+".namespace)", subject+".namespace == ''", subject+".namespace == object.metadata.namespace")
	fail := admissionregistrationv1.Ignore
	equivalent := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.NamespacedScope
	labels := map[string]string{ManagedByLabel: "bindkit"}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       &equivalent,
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{gvr.Group},
							APIVersions: []string{"*"},
							Resources:   []string{gvr.Resource},
							Scope:       &scope,
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: strings.Join(guards, " || "),
				MessageExpression: "'subject names namespace ' + " + subject + ".namespace + " +
					"', but a Binding binds subjects only in its own namespace (' + object.metadata.namespace + ')'",
				Reason: ptr(metav1.StatusReasonInvalid),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return vap, binding, nil
}

// NamespaceGuardObjects returns the namespace guard as Objects for a
// Reconciler, reading through the given listers (informers limited to the
// guard's name) and writing with kube.
func NamespaceGuardObjects(opts NamespaceGuardOptions, kube kubernetes.Interface, policies admissionlisters.ValidatingAdmissionPolicyLister, bindings admissionlisters.ValidatingAdmissionPolicyBindingLister, fieldManager string) ([]Object, error) {
	vap, binding, err := NamespaceGuard(opts)
	if err != nil {
		return nil, err
	}
	return validatingObjects(vap, binding, kube, policies, bindings, fieldManager), nil
}

// validatingObjects are a ValidatingAdmissionPolicy and its binding as
// Objects for a Reconciler.
func validatingObjects(vap *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding, kube kubernetes.Interface, policies admissionlisters.ValidatingAdmissionPolicyLister, bindings admissionlisters.ValidatingAdmissionPolicyBindingLister, fieldManager string) []Object {
	return []Object{
		&Typed[admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicy]{
			Desired: vap, Get: policies.Get, Client: kube.AdmissionregistrationV1().ValidatingAdmissionPolicies(),
			Spec:         func(o *admissionregistrationv1.ValidatingAdmissionPolicy) any { return &o.Spec },
			SetSpec:      func(dst, src *admissionregistrationv1.ValidatingAdmissionPolicy) { dst.Spec = src.Spec },
			Kind:         "ValidatingAdmissionPolicy",
			FieldManager: fieldManager,
		},
		&keyed[admissionregistrationv1.ValidatingAdmissionPolicyBinding, *admissionregistrationv1.ValidatingAdmissionPolicyBinding]{Typed[admissionregistrationv1.ValidatingAdmissionPolicyBinding, *admissionregistrationv1.ValidatingAdmissionPolicyBinding]{
			Desired: binding, Get: bindings.Get, Client: kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings(),
			Spec:         func(o *admissionregistrationv1.ValidatingAdmissionPolicyBinding) any { return &o.Spec },
			SetSpec:      func(dst, src *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { dst.Spec = src.Spec },
			Kind:         "ValidatingAdmissionPolicyBinding",
			FieldManager: fieldManager,
		}},
	}
}

// BindingKeyPrefix prefixes the Reconciler key of a policy binding, which
// shares its policy's name.
const BindingKeyPrefix = "binding/"

func ptr[T any](v T) *T { return &v }
