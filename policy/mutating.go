package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
)

// DefaultDeclaredPath is where a declarative Binding publishes the
// declarative.Spec it computed, for the policy to read as params.
const DefaultDeclaredPath = "status.declared"

// The labels and the annotation the policy's CEL reads and writes,
// repeated here as strings so this package does not import psbinding and
// duck: ExcludeLabel opts a subject or a namespace out of every Binding
// (psbinding.ExcludeLabel), IncludeLabel opts a namespace in under
// inclusion (psbinding.IncludeLabel), BoundAnnotation records which
// Bindings bound a subject (duck.BoundAnnotation).
const (
	ExcludeLabel    = "bindings.bindkit.dev/exclude"
	IncludeLabel    = "bindings.bindkit.dev/include"
	BoundAnnotation = "bindings.bindkit.dev/bound"
)

// WorkloadShape is a subject resource and the path of its pod spec.
type WorkloadShape struct {
	Group, Resource string
	// PodSpecPath is the dotted path of the pod spec in the object.
	PodSpecPath string
}

// DefaultWorkloadShapes are the built-in workloads: the pod template's spec
// at spec.template.spec, CronJob's under spec.jobTemplate, a bare Pod's at
// spec.
func DefaultWorkloadShapes() []WorkloadShape {
	t := "spec.template.spec"
	return []WorkloadShape{
		{"apps", "deployments", t}, {"apps", "statefulsets", t}, {"apps", "daemonsets", t}, {"apps", "replicasets", t},
		{"batch", "jobs", t}, {"batch", "cronjobs", "spec.jobTemplate.spec.template.spec"}, {"", "pods", "spec"},
	}
}

// MutatingPolicyOptions describe the declarative Binding kind a mutating
// policy applies. Resource and Kind are required; zero paths and shapes
// take the defaults above, the zero Name is MutatingPolicyName(Resource).
type MutatingPolicyOptions struct {
	// Resource and Kind are the Bindings' resource and kind.
	Resource schema.GroupVersionResource
	Kind     string
	// SubjectPath is the dotted path of the Binding's tracker.Reference.
	// Default: DefaultSubjectPath.
	SubjectPath string
	// DeclaredPath is where the Binding publishes its declarative.Spec.
	// Default: DefaultDeclaredPath.
	DeclaredPath string
	// Shapes are the subject resources and where their pod spec is.
	// Default: DefaultWorkloadShapes.
	Shapes []WorkloadShape
	// Name names the policy and its binding. Default:
	// MutatingPolicyName(Resource.GroupResource()).
	Name string
	// ExcludedNamespaces are never admitted in, whatever their Bindings
	// say, as the webhook is never called there: the process's system
	// namespace and, unless the operator allows them, the kube-*
	// namespaces. Default: none.
	ExcludedNamespaces []string
	// SkipPatchesBy, if set, is the field manager of the kind's
	// reconciler: the policy does not mutate the updates it sends (its
	// own patches, unbinding and rollbacks among them), as the webhook is
	// not called for them (psbinding.OwnPatchesCondition).
	SkipPatchesBy string
	// RolloutByDefault says the kind paces its Bindings' rollouts by
	// default (wiring.Options.Rollout); a Binding's
	// RolloutMaxChangingAnnotation overrides it. Under a rollout, a
	// subject that records an earlier generation of the Binding is left
	// as it is at admission (the rollout reaches it in its wave), as the
	// webhook does.
	RolloutByDefault bool
	// Inclusion admits only in namespaces labelled IncludeLabel=true
	// (psbinding.InclusionMode); by default every namespace but those
	// labelled ExcludeLabel=true.
	Inclusion bool
}

// MutatingPolicyName is the default name of a kind's mutating policy and
// its binding: "bind." followed by its group resource.
func MutatingPolicyName(gr schema.GroupResource) string { return "bind." + gr.String() }

// MutatingPolicy returns the MutatingAdmissionPolicy and its binding that
// apply a declarative Binding kind at admission, in the kube-apiserver:
// one of each per kind, whatever the number of Bindings. The binding's
// paramRef has no namespace and selects every Binding of the kind in the
// admitted object's namespace (namespace isolation by construction); the
// policy runs once per such Binding and, when the Binding's subject names
// the object (apiVersion, kind, and name or selector.matchLabels), merges
// the declared Spec the Binding published at DeclaredPath into the pod spec
// with an apply configuration: env entries and volume mounts into every
// container the Spec does not add, volumes, containers and init containers
// by name. Objects labelled ExcludeLabel=true are not matched.
//
// The binding's match resources keep the policy out of
// ExcludedNamespaces and of namespaces opted out (or not opted in), and a
// Binding whose subject names another namespace matches nothing, as on the
// webhook's path. A match also records the Binding, at its generation, in
// the subject's BoundAnnotation, as the webhook does, so the reconciler
// knows what to undo.
//
// Not expressed, left to the reconciler (documented in README): selectors
// with matchExpressions (such a Binding matches nothing here; the
// reconciler binds its subjects after they are created), envFrom (an
// atomic list the kube-apiserver cannot merge), a Binding being deleted
// (the webhook undoes it on a subject's update; here its finalizer's
// reconcile does), and undoing a Binding the subject records but no
// longer matches.
func MutatingPolicy(opts MutatingPolicyOptions) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	gvr := opts.Resource
	if gvr.Group == "" || gvr.Version == "" || gvr.Resource == "" || opts.Kind == "" {
		return nil, nil, fmt.Errorf("policy: MutatingPolicyOptions.Resource %q and Kind %q: group, version, resource and kind are all required", gvr.String(), opts.Kind)
	}
	name := opts.Name
	if name == "" {
		name = MutatingPolicyName(gvr.GroupResource())
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return nil, nil, fmt.Errorf("policy: MutatingPolicyOptions.Name %q: %s", name, strings.Join(msgs, "; "))
	}
	subject, err := celPath("SubjectPath", opts.SubjectPath, DefaultSubjectPath)
	if err != nil {
		return nil, nil, err
	}
	declared, err := celPath("DeclaredPath", opts.DeclaredPath, DefaultDeclaredPath)
	if err != nil {
		return nil, nil, err
	}
	shapes := opts.Shapes
	if len(shapes) == 0 {
		shapes = DefaultWorkloadShapes()
	}
	s, d := "params."+subject, "params."+declared
	variables := []admissionregistrationv1.Variable{
		{Name: "declared", Expression: "has(" + d + ") ? " + d + " : {}"},
		{Name: "matches", Expression: "!has(params.metadata.deletionTimestamp) && has(" + s + ") && " +
			s + ".apiVersion == object.apiVersion && " + s + ".kind == object.kind && " +
			// Namespace isolation: a subject naming another namespace binds nothing.
			"(!has(" + s + ".namespace) || " + s + ".namespace == '' || " + s + ".namespace == params.metadata.namespace) && " +
			"(has(" + s + ".name) && " + s + ".name != '' ? " + s + ".name == object.metadata.name : " +
			"has(" + s + ".selector) && (!has(" + s + ".selector.matchExpressions) || size(" + s + ".selector.matchExpressions) == 0) && " +
			"(!has(" + s + ".selector.matchLabels) || " + s + ".selector.matchLabels.all(k, has(object.metadata.labels) && k in object.metadata.labels && object.metadata.labels[k] == " + s + ".selector.matchLabels[k])))"},
		{Name: "added", Expression: "(has(variables.declared.containers) ? variables.declared.containers : []).map(c, c.name) + " +
			"(has(variables.declared.initContainers) ? variables.declared.initContainers : []).map(c, c.name)"},
		// The bound annotation as the webhook writes it (duck.Bound.String):
		// this Binding's entry, at its generation, among the others, sorted.
		{Name: "boundEntry", Expression: "'" + gvr.GroupResource().String() + "/' + params.metadata.name + ':' + string(params.metadata.generation)"},
		{Name: "boundAll", Expression: "(has(object.metadata.annotations) && '" + BoundAnnotation + "' in object.metadata.annotations ? " +
			"object.metadata.annotations['" + BoundAnnotation + "'].split(',') : []).map(e, e.trim())"},
		{Name: "boundOthers", Expression: "variables.boundAll.filter(e, e != '' && !e.startsWith('" + gvr.GroupResource().String() + "/' + params.metadata.name + ':'))"},
		// Under a rollout, a subject the rollout has not reached (it
		// records an earlier generation) waits for its wave; one rolled
		// back from this generation is held.
		{Name: "rolling", Expression: "has(params.metadata.annotations) && '" + RolloutMaxChangingAnnotation + "' in params.metadata.annotations ? " +
			"!(params.metadata.annotations['" + RolloutMaxChangingAnnotation + "'].trim() in ['0', 'off']) : " + strconv.FormatBool(opts.RolloutByDefault)},
		{Name: "applies", Expression: "variables.matches && " +
			"!(has(object.metadata.annotations) && '" + HeldAnnotation + "' in object.metadata.annotations && " +
			"object.metadata.annotations['" + HeldAnnotation + "'] == variables.boundEntry) && " +
			"!(variables.rolling && variables.boundAll.exists(e, e.startsWith('" + gvr.GroupResource().String() + "/' + params.metadata.name + ':') && e != variables.boundEntry))"},
	}
	// The defaults the kube-apiserver fills in, so that the stored specs
	// equal the built ones and the Reconciler settles.
	anyScope := admissionregistrationv1.AllScopes
	equivalent := admissionregistrationv1.Equivalent
	var rules []admissionregistrationv1.NamedRuleWithOperations
	// One mutation for every shape, the bound annotation included: the
	// kube-apiserver merges each mutation's apply configuration into the
	// object with server-side apply, whose cost is per mutation, not per
	// field (eight mutations, one per shape and the annotation's, made a
	// create three times slower than one).
	annotation := "metadata: Object.metadata{annotations: {'" + BoundAnnotation + "': " +
		"(variables.boundOthers.filter(e, e < variables.boundEntry) + [variables.boundEntry] + " +
		"variables.boundOthers.filter(e, e > variables.boundEntry)).join(',')}}"
	apply := "!variables.applies ? Object{} : "
	for i, sh := range shapes {
		path, err := celPath(fmt.Sprintf("Shapes[%d].PodSpecPath", i), sh.PodSpecPath, "")
		if err != nil {
			return nil, nil, err
		}
		if strings.Split(path, ".")[0] == "metadata" {
			return nil, nil, fmt.Errorf("policy: MutatingPolicyOptions.Shapes[%d].PodSpecPath %q: a pod spec is not under metadata", i, path)
		}
		rules = append(rules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{sh.Group}, APIVersions: []string{"*"}, Resources: []string{sh.Resource}, Scope: &anyScope},
		}})
		apply += "request.resource.group == '" + sh.Group + "' && request.resource.resource == '" + sh.Resource + "' ? " +
			"Object{" + annotation + ", " + podSpecFields(path) + "} : "
	}
	apply += "Object{" + annotation + "}"
	mutations := []admissionregistrationv1.Mutation{{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: apply},
	}}
	fail, ifNeeded := admissionregistrationv1.Fail, admissionregistrationv1.IfNeededReinvocationPolicy
	allow := admissionregistrationv1.AllowAction
	labels := map[string]string{ManagedByLabel: "bindkit"}
	m := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: gvr.GroupVersion().String(), Kind: opts.Kind},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules, MatchPolicy: &equivalent,
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}},
			MatchConditions:    matchConditions(opts.SkipPatchesBy),
			Variables:          variables,
			Mutations:          mutations,
			FailurePolicy:      &fail,
			ReinvocationPolicy: ifNeeded,
		},
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName:     name,
			ParamRef:       &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: &allow},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: namespaceSelector(opts), ObjectSelector: &metav1.LabelSelector{}, MatchPolicy: &equivalent},
		},
	}
	return m, b, nil
}

// The rollout annotations the policy reads (psbinding's, repeated):
// RolloutMaxChangingAnnotation on a Binding, HeldAnnotation on a subject.
const (
	RolloutMaxChangingAnnotation = "rollout.bindings.bindkit.dev/max-changing"
	HeldAnnotation               = "bindings.bindkit.dev/held"
)

// OwnPatchesCondition names the match condition that spares the
// reconciler's own patches (psbinding.OwnPatchesCondition, repeated).
const OwnPatchesCondition = "bindings.bindkit.dev/not-own-patch"

// matchConditions leave alone objects labelled ExcludeLabel=true and,
// with skipPatchesBy, the updates that field manager sends.
func matchConditions(skipPatchesBy string) []admissionregistrationv1.MatchCondition {
	out := []admissionregistrationv1.MatchCondition{{
		Name: "not-excluded",
		Expression: "!has(object.metadata.labels) || !('" + ExcludeLabel + "' in object.metadata.labels) || " +
			"object.metadata.labels['" + ExcludeLabel + "'] != 'true'",
	}}
	if skipPatchesBy != "" {
		out = append(out, admissionregistrationv1.MatchCondition{
			Name: OwnPatchesCondition,
			// As the webhook's: an UPDATE's options carry its
			// fieldManager, left out when empty, hence has().
			Expression: fmt.Sprintf("!(request.operation == 'UPDATE' && has(request.options.fieldManager) && request.options.fieldManager == %s)", strconv.Quote(skipPatchesBy)),
		})
	}
	return out
}

// namespaceSelector is where the webhook would be called: not in the
// excluded namespaces, and not in a namespace opted out (or, under
// inclusion, only in one opted in).
func namespaceSelector(opts MutatingPolicyOptions) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{}
	if excluded := slices.Sorted(slices.Values(opts.ExcludedNamespaces)); len(excluded) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: slices.Compact(excluded)})
	}
	if opts.Inclusion {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: IncludeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}})
	} else {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: ExcludeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}})
	}
	return sel
}

// podSpecFields is the part of an apply configuration that merges the
// declared Spec into the pod spec at path: the fields from the object's
// root down to it, as "spec: Object.spec{template: ...}".
func podSpecFields(path string) string {
	obj := "object." + path
	typ := "Object." + path
	list := func(field string) string {
		return "(has(variables.declared." + field + ") ? variables.declared." + field + " : [])"
	}
	// The workload's own containers (not those the Spec adds) get the env
	// entries and mounts; its init containers too when the Spec says so.
	own := func(field string) string {
		return "(has(" + obj + "." + field + ") ? " + obj + "." + field + " : []).filter(c, !(c.name in variables.added))" +
			".map(c, " + typ + "." + field + "{name: c.name, env: " + list("env") + ", volumeMounts: " + list("volumeMounts") + "})"
	}
	containers := own("containers") + " + " + list("containers")
	initContainers := "(has(variables.declared.initContainersToo) && variables.declared.initContainersToo ? " + own("initContainers") + " : [])" +
		" + " + list("initContainers")
	out := "containers: " + containers + ", initContainers: " + initContainers + ", volumes: " + list("volumes")
	fields := strings.Split(path, ".")
	for i := len(fields) - 1; i >= 1; i-- {
		out = fields[i] + ": Object." + strings.Join(fields[:i+1], ".") + "{" + out + "}"
	}
	return fields[0] + ": Object." + fields[0] + "{" + out + "}"
}

// celPath checks a dotted field path (or takes def when it is empty) and
// returns it; each field must be a C identifier, so nothing but a path
// reaches the CEL the API server compiles.
func celPath(field, path, def string) (string, error) {
	if path == "" {
		path = def
	}
	for i, f := range strings.Split(path, ".") {
		if msgs := validation.IsCIdentifier(f); len(msgs) > 0 {
			return "", fmt.Errorf("policy: MutatingPolicyOptions.%s %q: field %d %q: %s", field, path, i, f, strings.Join(msgs, "; "))
		}
	}
	return path, nil
}

// MutatingPolicyObjects returns a kind's mutating policy and its binding as
// Objects for a Reconciler, the same machinery that keeps the namespace
// guard programmed, reading through listers limited to the policy's name.
// Call it only when MutatingPoliciesServed says so; otherwise the kind is
// admitted by the webhook.
func MutatingPolicyObjects(opts MutatingPolicyOptions, kube kubernetes.Interface, policies admissionlisters.MutatingAdmissionPolicyLister, bindings admissionlisters.MutatingAdmissionPolicyBindingLister, fieldManager string) ([]Object, error) {
	m, b, err := MutatingPolicy(opts)
	if err != nil {
		return nil, err
	}
	type mapT = admissionregistrationv1.MutatingAdmissionPolicy
	type mapbT = admissionregistrationv1.MutatingAdmissionPolicyBinding
	return []Object{
		&Typed[mapT, *mapT]{
			Desired: m, Get: policies.Get, Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicies(),
			Spec:    func(o *mapT) any { return &o.Spec },
			SetSpec: func(dst, src *mapT) { dst.Spec = src.Spec },
			Kind:    "MutatingAdmissionPolicy", FieldManager: fieldManager,
		},
		&keyed[mapbT, *mapbT]{Typed[mapbT, *mapbT]{
			Desired: b, Get: bindings.Get, Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings(),
			Spec:    func(o *mapbT) any { return &o.Spec },
			SetSpec: func(dst, src *mapbT) { dst.Spec = src.Spec },
			Kind:    "MutatingAdmissionPolicyBinding", FieldManager: fieldManager,
		}},
	}, nil
}

// keyed is a policy's binding under a key of its own (BindingKeyPrefix and
// its name): a policy and its binding share a name, and a Reconciler's keys
// are names.
type keyed[T any, PT interface {
	*T
	metav1.Object
}] struct {
	Typed[T, PT]
}

// Name implements Object.
func (k *keyed[T, PT]) Name() string { return BindingKeyPrefix + k.Desired.GetName() }
