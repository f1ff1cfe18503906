package wiring

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/policy"
)

// AdmissionPolicies returns the admission policies b's Webhook keeps
// programmed on b's own Bindings, as objects to install with the kind's
// manifests (config/), so that they hold from the install on, with no
// bindkit process running: the authority policy (policy.Authority) and
// its binding, the namespace guard (policy.NamespaceGuard, unless
// Options.WithoutNamespaceGuard) and its binding, and the requested-by
// record (policy.RequestedBy), a MutatingAdmissionPolicy, and its binding.
// Each carries its kind (TypeMeta), for writing as YAML. The process
// programs the same specs, so an install from manifests and the process
// agree, and neither rewrites what the other wrote.
//
// bindingtest.CheckManifests compares them with a kind's config/, and
// writes them there.
func (b *Kind) AdmissionPolicies() ([]runtime.Object, error) {
	return admissionPolicies(b.authority, b.namespaceGuard)
}

// AdmissionPoliciesFor is Kind.AdmissionPolicies for the kind New would
// wire from gvr and opts, without its Go type: what `bindkit new` writes
// into a new module's config/.
func AdmissionPoliciesFor(gvr schema.GroupVersionResource, opts Options) ([]runtime.Object, error) {
	return admissionPolicies(authorityOptions(gvr, opts), !opts.WithoutNamespaceGuard)
}

// authorityOptions are the authority policy's options of the kind wired
// from gvr and opts.
func authorityOptions(gvr schema.GroupVersionResource, opts Options) policy.AuthorityOptions {
	return policy.AuthorityOptions{Resource: gvr, SubjectPath: opts.SubjectPath, SubjectKinds: opts.SubjectKinds, References: opts.References}
}

func admissionPolicies(authority policy.AuthorityOptions, namespaceGuard bool) ([]runtime.Object, error) {
	gv := admissionregistrationv1.SchemeGroupVersion
	vap, vapb, err := policy.Authority(authority)
	if err != nil {
		return nil, err
	}
	out := []runtime.Object{vap, vapb}
	if namespaceGuard {
		guard, guardBinding, err := policy.NamespaceGuard(policy.NamespaceGuardOptions{Resource: authority.Resource, SubjectPath: authority.SubjectPath})
		if err != nil {
			return nil, err
		}
		out = append(out, guard, guardBinding)
	}
	m, mb, err := policy.RequestedBy(authority.Resource, "")
	if err != nil {
		return nil, err
	}
	out = append(out, m, mb)
	for _, o := range out {
		var kind string
		switch o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			kind = "ValidatingAdmissionPolicy"
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			kind = "ValidatingAdmissionPolicyBinding"
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			kind = "MutatingAdmissionPolicy"
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			kind = "MutatingAdmissionPolicyBinding"
		}
		o.GetObjectKind().SetGroupVersionKind(gv.WithKind(kind))
	}
	return out, nil
}
