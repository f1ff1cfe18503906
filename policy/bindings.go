package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
)

// BindingRef is what a mutating policy's binding for one Binding needs of
// it: where it is, and the selector of its subject.
type BindingRef struct {
	Namespace, Name string
	// Selector is the Binding's subject selector; nil when the Binding
	// names its subject by name (every object of its namespace is then
	// tested by the policy's match condition).
	Selector *metav1.LabelSelector
}

// PolicyLabel labels each binding MutatingPolicyBinding returns with its
// policy (PolicyLabelValue), so that a process finds all of them.
const PolicyLabel = "bindings.bindkit.dev/policy"

// PolicyLabelValue is the value of PolicyLabel on the bindings of the
// policy named policyName: the name, or a hash of it when the name is
// longer than a label value may be.
func PolicyLabelValue(policyName string) string {
	if len(validation.IsValidLabelValue(policyName)) == 0 {
		return policyName
	}
	return "sha256-" + hashOf(policyName)[:40]
}

// MutatingPolicyBinding returns the binding that applies the policy
// MutatingPolicy(opts) returns with one Binding as params: its paramRef
// names the Binding (a Binding that does not exist, or no longer, is
// skipped), and its match resources keep it to the Binding's namespace
// (the policy keeps out of where opts say) and, when the Binding
// selects its subject, to objects its selector matches, so that the
// kube-apiserver drops a Binding that cannot name the object before it
// evaluates anything. The binding's name is the policy's, the Binding's
// namespace and name, dot-separated (a hash of them when that is longer
// than a name may be). An invalid selector is an error naming the Binding.
func MutatingPolicyBinding(opts MutatingPolicyOptions, ref BindingRef) (*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	policyName, err := opts.name()
	if err != nil {
		return nil, err
	}
	if ref.Namespace == "" || ref.Name == "" {
		return nil, fmt.Errorf("policy: binding for %s %q in namespace %q: a namespace and a name are required", opts.Kind, ref.Name, ref.Namespace)
	}
	objects := &metav1.LabelSelector{}
	if ref.Selector != nil {
		objects = ref.Selector.DeepCopy()
		if errs := metav1validation.ValidateLabelSelector(objects, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec", "subject", "selector")); len(errs) > 0 {
			return nil, fmt.Errorf("policy: %s %s/%s: %w", opts.Kind, ref.Namespace, ref.Name, errs.ToAggregate())
		}
	}
	// One label, not expressions: the kube-apiserver parses every
	// binding's selectors on every request it admits (each requirement's
	// key and values checked), so a binding's cost is per requirement;
	// where the policy keeps out of (namespaceSelector) it tests once, in
	// the policy's match constraints.
	namespaces := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ref.Namespace}}
	allow := admissionregistrationv1.AllowAction
	equivalent := admissionregistrationv1.Equivalent
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bindingName(policyName, ref), Labels: map[string]string{
			ManagedByLabel: "bindkit", PolicyLabel: PolicyLabelValue(policyName)}},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName:     policyName,
			ParamRef:       &admissionregistrationv1.ParamRef{Name: ref.Name, Namespace: ref.Namespace, ParameterNotFoundAction: &allow},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: namespaces, ObjectSelector: objects, MatchPolicy: &equivalent},
		},
	}, nil
}

// bindingName is the name of policyName's binding for ref.
func bindingName(policyName string, ref BindingRef) string {
	if name := policyName + "." + ref.Namespace + "." + ref.Name; len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	h := hashOf(ref.Namespace + "/" + ref.Name)[:32]
	if name := policyName + "." + h; len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	return "bind-" + hashOf(policyName)[:16] + "." + h
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// BindingSet keeps a mutating policy's bindings programmed, one per
// Binding (MutatingPolicyBinding): it creates the missing ones, restores
// the spec of those edited, and deletes those of Bindings that are gone,
// along with a binding an earlier bindkit named after the policy alone. It
// is an Object whose key is BindingKeyPrefix and the policy's name;
// enqueue it on every event of the Bindings and of the bindings.
type BindingSet struct {
	// Options are the policy's.
	Options MutatingPolicyOptions
	// Refs lists the Bindings to bind the policy with. A Binding whose
	// binding cannot be built (an invalid selector) is logged and left to
	// the reconciler.
	Refs func() ([]BindingRef, error)
	// Lister reads the bindings; Client writes them.
	Lister admissionlisters.MutatingAdmissionPolicyBindingLister
	Client admissionclient.MutatingAdmissionPolicyBindingInterface
	// FieldManager is sent with every write.
	FieldManager string
	// Logger logs the Bindings skipped; the zero Logger is zap.NewNop().
	Logger *zap.Logger
	// Written, if set, is told each Binding whose binding was created or
	// restored: the kube-apiserver has yet to load it.
	Written func(BindingRef)
}

// Name implements Object.
func (s *BindingSet) Name() string {
	name, _ := s.Options.name()
	return BindingKeyPrefix + name
}

// Ensure implements Object: Created when it created a binding, else
// Restored when it restored one, else Unchanged (deleting bindings is not
// a change admission must wait for).
func (s *BindingSet) Ensure(ctx context.Context) (Action, error) {
	policyName, err := s.Options.name()
	if err != nil {
		return Unchanged, err
	}
	desired, err := s.desired()
	if err != nil {
		return Unchanged, err
	}
	existing, err := s.Lister.List(labels.SelectorFromSet(labels.Set{PolicyLabel: PolicyLabelValue(policyName)}))
	if err != nil {
		return Unchanged, fmt.Errorf("MutatingAdmissionPolicyBindings of %s: list: %w", policyName, err)
	}
	if legacy, err := s.Lister.Get(policyName); err == nil {
		existing = append(existing, legacy)
	}
	p := planBindings(desired, existing)
	action, errs := Unchanged, []error(nil)
	for _, b := range p.create {
		if _, err := s.Client.Create(ctx, b.binding, metav1.CreateOptions{FieldManager: s.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("MutatingAdmissionPolicyBinding %s: create: %w", b.binding.Name, err))
			continue
		}
		action = Created
		s.written(b.ref)
	}
	for _, b := range p.update {
		if _, err := s.Client.Update(ctx, b.binding, metav1.UpdateOptions{FieldManager: s.FieldManager}); err != nil {
			errs = append(errs, fmt.Errorf("MutatingAdmissionPolicyBinding %s: restore spec: %w", b.binding.Name, err))
			continue
		}
		action = cmpAction(action, Restored)
		s.written(b.ref)
	}
	for _, name := range p.delete {
		if err := s.Client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("MutatingAdmissionPolicyBinding %s: delete: %w", name, err))
		}
	}
	return action, errors.Join(errs...)
}

func (s *BindingSet) written(ref BindingRef) {
	if s.Written != nil {
		s.Written(ref)
	}
}

// cmpAction keeps Created over Restored over Unchanged.
func cmpAction(a, b Action) Action {
	if a == Created || b == Created {
		return Created
	}
	if a == Restored || b == Restored {
		return Restored
	}
	return Unchanged
}

// desiredBinding is a binding to program and the Binding it is for.
type desiredBinding struct {
	ref     BindingRef
	binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// desired builds the bindings of the listed Bindings.
func (s *BindingSet) desired() ([]desiredBinding, error) {
	refs, err := s.Refs()
	if err != nil {
		return nil, err
	}
	out := make([]desiredBinding, 0, len(refs))
	for _, ref := range refs {
		b, err := MutatingPolicyBinding(s.Options, ref)
		if err != nil {
			if s.Logger != nil {
				s.Logger.Info("Binding not applied at admission: its policy binding cannot be built; the reconciler binds its subjects", zap.Error(err))
			}
			continue
		}
		out = append(out, desiredBinding{ref: ref, binding: b})
	}
	return out, nil
}

// bindingsPlan is what a BindingSet writes: whole objects to create, the
// existing ones with their spec restored, the names to delete.
type bindingsPlan struct {
	create, update []desiredBinding
	delete         []string
}

// planBindings compares the desired bindings with those that exist (by
// name; only the spec and the labels the desired one carries matter).
func planBindings(desired []desiredBinding, existing []*admissionregistrationv1.MutatingAdmissionPolicyBinding) bindingsPlan {
	byName := make(map[string]*admissionregistrationv1.MutatingAdmissionPolicyBinding, len(existing))
	for _, e := range existing {
		byName[e.Name] = e
	}
	var p bindingsPlan
	for _, d := range desired {
		cur, ok := byName[d.binding.Name]
		delete(byName, d.binding.Name)
		switch {
		case !ok:
			p.create = append(p.create, d)
		case !equality.Semantic.DeepEqual(cur.Spec, d.binding.Spec) || !hasLabels(cur.Labels, d.binding.Labels):
			restored := cur.DeepCopy()
			restored.Spec = d.binding.Spec
			restored.Labels = withLabels(cur.Labels, d.binding.Labels)
			p.update = append(p.update, desiredBinding{ref: d.ref, binding: restored})
		}
	}
	for name := range byName {
		p.delete = append(p.delete, name)
	}
	slices.Sort(p.delete)
	return p
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// removeBindings deletes every binding of policyName (by PolicyLabel, and
// the one an earlier bindkit named after the policy alone), reporting
// whether it deleted one.
func removeBindings(ctx context.Context, client admissionclient.MutatingAdmissionPolicyBindingInterface, policyName string) (bool, error) {
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: PolicyLabel + "=" + PolicyLabelValue(policyName)})
	if err != nil {
		return false, fmt.Errorf("MutatingAdmissionPolicyBindings of %s: list: %w", policyName, err)
	}
	names := []string{policyName}
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	removed, errs := false, []error(nil)
	for _, name := range names {
		switch err := client.Delete(ctx, name, metav1.DeleteOptions{}); {
		case err == nil:
			removed = true
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("MutatingAdmissionPolicyBinding %s: delete: %w", name, err))
		}
	}
	return removed, errors.Join(errs...)
}
