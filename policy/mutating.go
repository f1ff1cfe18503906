package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
)

// DefaultDeclaredPath is where a declarative Binding publishes the
// declarative.Spec it computed, for the policy to read as params;
// DefaultDeclaredGenerationPath is where it publishes the generation of
// the Binding the Spec was computed from (declarative.Status).
const (
	DefaultDeclaredPath           = "status.declared"
	DefaultDeclaredGenerationPath = "status.declaredGeneration"
)

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
	// DeclaredGenerationPath is where the Binding publishes the generation
	// the Spec was computed from, which the policy records on the subjects
	// it binds. Default: DefaultDeclaredGenerationPath.
	DeclaredGenerationPath string
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

// MutatingPolicy returns the MutatingAdmissionPolicy that applies a
// declarative Binding kind at admission, in the kube-apiserver: one per
// kind, whatever the number of Bindings, bound once per Binding by
// MutatingPolicyBinding, which gives the Binding as params.
//
// The kube-apiserver tests a binding's match resources first: only a
// Binding of the admitted object's namespace whose subject selector
// matches the object's labels (or that names its subject by name) is
// evaluated at all. For those it evaluates the policy's match condition
// (AppliesCondition), which reads the Binding as params, converting the
// whole Binding to a CEL value (a JSON round trip, about 0.1 ms on 2
// cores; bench/RESULTS.md, 2026-11-27); only a Binding that passes it
// costs a mutation (a merge of an apply configuration). So an object no
// Binding names pays a label-selector test per Binding of the kind (in
// any namespace: the kube-apiserver parses and tests every binding's
// selectors on every request it admits, which is why a binding's
// selectors hold as few requirements as they can), and
// a Binding naming its subject by name one evaluation per create of its
// kind in its namespace. A Binding passes the condition when:
//
//   - it has published a declared Spec and the generation it was computed
//     from (DeclaredPath, DeclaredGenerationPath): a Binding that has not
//     (new, created while its controller is down, invalid, or too large
//     to publish) is skipped, never an error, as the webhook skips a
//     Binding it has not indexed yet; the reconciler binds the subjects
//     it can once the Binding is published;
//   - it is not being deleted, and its subject names the object:
//     apiVersion, kind, and name or selector.matchLabels (a selector
//     with matchExpressions matches nothing here; an empty selector
//     matches every object of the kind, as on the webhook's path); a
//     subject naming another namespace matches nothing;
//   - the object holds no record of the Binding of a newer format than
//     this bindkit's (duck.RecordFormat), which it leaves alone;
//   - the object is not held from that generation (HeldAnnotation), and,
//     under a rollout policy, the object either records the Binding at
//     that generation, or records nothing of it while the Binding's
//     rollout of that generation is complete and not paused or undone by
//     an operator (RolloutPausedAnnotation, RolloutUndoAnnotation, which
//     put a Binding under a rollout even without a policy): a subject the
//     rollout has not reached waits for its wave, a halted, paused or
//     planned generation reaches no new subject; bare Pods and Jobs,
//     which no rollout can reach later, are not held back but by a hold;
//   - the object does not carry the change already: a Binding whose
//     record (at its published generation) and Spec the object holds
//     as the mutation would write them is not merged again, which would
//     change nothing. This is what makes the second invocation cheap
//     that the policy's own mutation causes (reinvocationPolicy
//     IfNeeded: the kube-apiserver invokes a policy that changed the
//     object once more), while a container another mutator adds after
//     the first invocation still gets the Binding's env entries and
//     mounts. Values are compared whole, so one the kube-apiserver
//     defaulted after the merge (a container's defaults, a fieldRef's
//     apiVersion) counts as different: the merge runs again, as it would
//     without this test.
//
// The mutation merges the published Spec into the pod spec with an apply
// configuration (env entries and volume mounts into every container the
// Spec does not add, volumes, containers and init containers by name) and
// records the Binding, with its UID and the published generation, in the
// subject's BoundAnnotation, in place of its earlier entry: the record
// names exactly the change the subject carries. Objects labelled
// ExcludeLabel=true are not matched. The policy's match constraints keep
// it out of ExcludedNamespaces and of namespaces opted out (or not opted
// in), as on the webhook's path.
//
// Every expression guards what it reads with has(), so no Binding and no
// subject makes the policy fail: with failurePolicy Fail, only a failure
// of the kube-apiserver itself refuses a create.
//
// Not expressed, left to the reconciler (documented in docs/authors-guide.md): selectors
// with matchExpressions, envFrom (an atomic list the kube-apiserver cannot
// merge), a Binding being deleted (the webhook undoes it on a subject's
// update; here its finalizer's reconcile does), and undoing a Binding the
// subject records but no longer matches.
func MutatingPolicy(opts MutatingPolicyOptions) (*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	gvr := opts.Resource
	name, err := opts.name()
	if err != nil {
		return nil, err
	}
	p, err := opts.paths()
	if err != nil {
		return nil, err
	}
	shapes, err := opts.shapePaths()
	if err != nil {
		return nil, err
	}
	mutation, rules := opts.mutation(shapes)
	// The defaults the kube-apiserver fills in, so that the stored specs
	// equal the built ones and the Reconciler settles.
	equivalent := admissionregistrationv1.Equivalent
	fail, ifNeeded := admissionregistrationv1.Fail, admissionregistrationv1.IfNeededReinvocationPolicy
	labels := map[string]string{ManagedByLabel: "bindkit"}
	m := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: gvr.GroupVersion().String(), Kind: opts.Kind},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: rules, MatchPolicy: &equivalent,
				NamespaceSelector: namespaceSelector(opts), ObjectSelector: &metav1.LabelSelector{}},
			MatchConditions:    opts.matchConditions(p, shapes),
			Variables:          opts.variables(p),
			Mutations:          []admissionregistrationv1.Mutation{mutation},
			FailurePolicy:      &fail,
			ReinvocationPolicy: ifNeeded,
		},
	}
	return m, nil
}

// name is the policy's name, checked, after checking the options every
// object of the policy needs.
func (opts MutatingPolicyOptions) name() (string, error) {
	gvr := opts.Resource
	if gvr.Group == "" || gvr.Version == "" || gvr.Resource == "" || opts.Kind == "" {
		return "", fmt.Errorf("policy: MutatingPolicyOptions.Resource %q and Kind %q: group, version, resource and kind are all required", gvr.String(), opts.Kind)
	}
	name := opts.Name
	if name == "" {
		name = MutatingPolicyName(gvr.GroupResource())
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", fmt.Errorf("policy: MutatingPolicyOptions.Name %q: %s", name, strings.Join(msgs, "; "))
	}
	return name, nil
}

// celPaths are the CEL expressions of what the policy reads of a Binding:
// its subject, published Spec and generation, and rollout.
type celPaths struct {
	subject, declared, declaredGeneration, rollout string
	// entry is the Binding's BoundAnnotation entry at its published
	// generation; key its prefix for any generation; legacyKey that of an
	// entry written before records named UIDs.
	entry, key, legacyKey string
	// others are the object's BoundAnnotation entries but the Binding's
	// (and a predecessor's of the same name, or one written before UIDs).
	others string
}

func (opts MutatingPolicyOptions) paths() (celPaths, error) {
	subject, err := celPath("SubjectPath", opts.SubjectPath, DefaultSubjectPath)
	if err != nil {
		return celPaths{}, err
	}
	declared, err := celPath("DeclaredPath", opts.DeclaredPath, DefaultDeclaredPath)
	if err != nil {
		return celPaths{}, err
	}
	generation, err := celPath("DeclaredGenerationPath", opts.DeclaredGenerationPath, DefaultDeclaredGenerationPath)
	if err != nil {
		return celPaths{}, err
	}
	gr := opts.Resource.GroupResource().String()
	p := celPaths{subject: "params." + subject, declared: "params." + declared, declaredGeneration: "params." + generation, rollout: "params.status.rollout",
		key:       "'" + gr + "/' + params.metadata.name + '@' + params.metadata.uid + ':'",
		legacyKey: "'" + gr + "/' + params.metadata.name + ':'"}
	p.entry = p.key + " + string(" + p.declaredGeneration + ")"
	p.others = annotationList(BoundAnnotation) + ".filter(e, e != '' && !e.startsWith('" + gr + "/' + params.metadata.name + '@') && !e.startsWith(" + p.legacyKey + "))"
	return p, nil
}

// annotationList is the comma-separated list annotation key of the object,
// trimmed entries, [] when absent.
func annotationList(key string) string {
	return "(has(object.metadata.annotations) && '" + key + "' in object.metadata.annotations ? " +
		"object.metadata.annotations['" + key + "'].split(',').map(e, e.trim()) : [])"
}

// matchConditions are the tests a Binding (params) passes before it costs
// a mutation (see MutatingPolicy), as one condition, AppliesCondition: the
// kube-apiserver evaluates every condition of a policy for every Binding
// of the namespace (it stops at the first false result only after all are
// evaluated), while one conjunction stops at its first false term, so a
// Binding that does not name the object costs a few field reads. The terms
// are ordered from the one most Bindings fail (naming the object) to the
// costliest (the rollout's, which splits annotations). Each term is total
// (has() guards what it reads), and a term relies on an earlier one only
// where the earlier one being false skips the Binding: CEL's && is false
// when either side is, even if the other is an error.
func (opts MutatingPolicyOptions) matchConditions(p celPaths, shapes []shapePath) []admissionregistrationv1.MatchCondition {
	s := p.subject
	names := "!has(params.metadata.deletionTimestamp) && has(" + s + ") && has(" + s + ".apiVersion) && has(" + s + ".kind) && " +
		s + ".apiVersion == object.apiVersion && " + s + ".kind == object.kind && " +
		// Namespace isolation: a subject naming another namespace binds nothing.
		"(!has(" + s + ".namespace) || " + s + ".namespace == '' || " + s + ".namespace == params.metadata.namespace) && " +
		"(has(" + s + ".name) && " + s + ".name != '' ? " + s + ".name == object.metadata.name : " +
		"has(" + s + ".selector) && (!has(" + s + ".selector.matchExpressions) || size(" + s + ".selector.matchExpressions) == 0) && " +
		"(!has(" + s + ".selector.matchLabels) || " + s + ".selector.matchLabels.all(k, has(object.metadata.labels) && k in object.metadata.labels && object.metadata.labels[k] == " + s + ".selector.matchLabels[k])))"
	published := "has(params.status) && has(" + p.declared + ") && has(" + p.declaredGeneration + ") && " +
		"type(" + p.declaredGeneration + ") == int && " + p.declaredGeneration + " > 0 && type(" + p.declared + ") == map"
	notExcluded := "(!has(object.metadata.labels) || !('" + ExcludeLabel + "' in object.metadata.labels) || " +
		"object.metadata.labels['" + ExcludeLabel + "'] != 'true')"
	terms := []string{names, published, notExcluded}
	if opts.SkipPatchesBy != "" {
		// As the webhook's OwnPatchesCondition: an UPDATE's options carry
		// its fieldManager, left out when empty, hence has().
		terms = append(terms, fmt.Sprintf("!(request.operation == 'UPDATE' && has(request.options.fieldManager) && request.options.fieldManager == %s)", strconv.Quote(opts.SkipPatchesBy)))
	}
	held := "!" + annotationList(HeldAnnotation) + ".exists(e, e == " + p.entry + " || e == " + p.legacyKey + " + string(" + p.declaredGeneration + "))"
	// A newer bindkit's record of the Binding ("<key>:v<N>...", see
	// duck.RecordFormat): left alone, as the webhook and the reconciler
	// leave it.
	newer := "!(" + annotationList(BoundAnnotation) + " + " + annotationList(HeldAnnotation) + ").exists(e, e.startsWith(" + p.key + " + 'v') || e.startsWith(" + p.legacyKey + " + 'v'))"
	terms = append(terms, held, newer, opts.rolloutReaches(p), "!"+carried(p, shapes))
	return []admissionregistrationv1.MatchCondition{{Name: AppliesCondition, Expression: "(" + strings.Join(terms, ") && (") + ")"}}
}

// AppliesCondition names the policy's one match condition: the Binding
// (params) names the admitted object and applies to it now; see
// MutatingPolicy.
const AppliesCondition = "binding-applies"

// rolloutReaches is the condition under which a Binding's rollout policy
// lets admission apply its published generation to the object: no policy;
// the object records it at that generation; the object records nothing of
// it and the rollout of that generation is complete; the object is a bare
// Pod or a Job.
func (opts MutatingPolicyOptions) rolloutReaches(p celPaths) string {
	ro := p.rollout
	annotation := func(key string) string {
		return "has(params.metadata.annotations) && '" + key + "' in params.metadata.annotations && params.metadata.annotations['" + key + "'].trim()"
	}
	// Paused, or its generation undone: an operator holds the Binding.
	held := "((" + annotation(RolloutPausedAnnotation) + " == 'true') || (has(params.metadata.generation) && " +
		annotation(RolloutUndoAnnotation) + " == string(params.metadata.generation)))"
	rolling := "(" + held + " || (has(params.metadata.annotations) && '" + RolloutMaxChangingAnnotation + "' in params.metadata.annotations ? " +
		"!(params.metadata.annotations['" + RolloutMaxChangingAnnotation + "'].trim() in ['0', 'off']) : " + strconv.FormatBool(opts.RolloutByDefault) + "))"
	mine := annotationList(BoundAnnotation) + ".filter(e, e.startsWith(" + p.key + ") || e.startsWith(" + p.legacyKey + "))"
	complete := "has(params.status) && has(" + ro + ") && has(" + ro + ".generation) && " + ro + ".generation == " + p.declaredGeneration + " && " +
		"(!has(" + ro + ".changing) || size(" + ro + ".changing) == 0) && (!has(" + ro + ".halted) || size(" + ro + ".halted) == 0) && " +
		"has(" + ro + ".updated) && has(" + ro + ".total) && " + ro + ".updated >= " + ro + ".total"
	admissionOnly := "(request.resource.group == '' && request.resource.resource == 'pods') || (request.resource.group == 'batch' && request.resource.resource == 'jobs')"
	return "!has(" + p.declaredGeneration + ") || !" + rolling + " || " + admissionOnly + " || " +
		"(size(" + mine + ") > 0 ? " + mine + ".all(e, e == " + p.entry + " || e == " + p.legacyKey + " + string(" + p.declaredGeneration + ")) : !" + held + " && " + complete + ")"
}

// variables are what the mutation reads, evaluated only for a Binding
// that passed the match conditions.
func (opts MutatingPolicyOptions) variables(p celPaths) []admissionregistrationv1.Variable {
	return []admissionregistrationv1.Variable{
		{Name: "declared", Expression: p.declared},
		{Name: "added", Expression: "(has(variables.declared.containers) ? variables.declared.containers : []).map(c, c.name) + " +
			"(has(variables.declared.initContainers) ? variables.declared.initContainers : []).map(c, c.name)"},
		// The bound annotation as the webhook writes it (duck.Bound.String):
		// this Binding's entry, at its published generation, among the
		// others (a predecessor's of the same name, or one written before
		// UIDs, replaced), sorted.
		{Name: "boundEntry", Expression: p.entry},
		{Name: "boundOthers", Expression: p.others},
	}
}

// boundValue is the BoundAnnotation value the mutation writes (as the
// webhook does, duck.Bound.String): the entry among the others, sorted.
func boundValue(others, entry string) string {
	return "(" + others + ".filter(e, e < " + entry + ") + [" + entry + "] + " + others + ".filter(e, e > " + entry + ")).join(',')"
}

// shapePath is a WorkloadShape with its pod spec's path checked.
type shapePath struct {
	WorkloadShape
	path string
}

// shapePaths are the options' shapes (DefaultWorkloadShapes if none),
// their paths checked.
func (opts MutatingPolicyOptions) shapePaths() ([]shapePath, error) {
	shapes := opts.Shapes
	if len(shapes) == 0 {
		shapes = DefaultWorkloadShapes()
	}
	out := make([]shapePath, 0, len(shapes))
	for i, sh := range shapes {
		path, err := celPath(fmt.Sprintf("Shapes[%d].PodSpecPath", i), sh.PodSpecPath, "")
		if err != nil {
			return nil, err
		}
		if strings.Split(path, ".")[0] == "metadata" {
			return nil, fmt.Errorf("policy: MutatingPolicyOptions.Shapes[%d].PodSpecPath %q: a pod spec is not under metadata", i, path)
		}
		out = append(out, shapePath{sh, path})
	}
	return out, nil
}

// byShape is the CEL that picks, by the request's resource, the
// expression each shape's path gives, and otherwise the last.
func byShape(shapes []shapePath, each func(path string) string, otherwise string) string {
	out := ""
	for _, sh := range shapes {
		out += "request.resource.group == '" + sh.Group + "' && request.resource.resource == '" + sh.Resource + "' ? " + each(sh.path) + " : "
	}
	return out + otherwise
}

// mutation is the one mutation for every shape, the bound annotation
// included: the kube-apiserver merges each mutation's apply configuration
// into the object with server-side apply, whose cost is per mutation, not
// per field (eight mutations, one per shape and the annotation's, made a
// create three times slower than one).
func (opts MutatingPolicyOptions) mutation(shapes []shapePath) (admissionregistrationv1.Mutation, []admissionregistrationv1.NamedRuleWithOperations) {
	anyScope := admissionregistrationv1.AllScopes
	var rules []admissionregistrationv1.NamedRuleWithOperations
	for _, sh := range shapes {
		rules = append(rules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{sh.Group}, APIVersions: []string{"*"}, Resources: []string{sh.Resource}, Scope: &anyScope},
		}})
	}
	annotation := "metadata: Object.metadata{annotations: {'" + BoundAnnotation + "': " + boundValue("variables.boundOthers", "variables.boundEntry") + "}}"
	apply := byShape(shapes, func(path string) string { return "Object{" + annotation + ", " + podSpecFields(path) + "}" }, "Object{"+annotation+"}")
	return admissionregistrationv1.Mutation{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: apply},
	}, rules
}

// carried is the CEL test that the object carries the Binding's change
// and its record as the mutation would write them, so that merging it
// would change nothing (see MutatingPolicy): the BoundAnnotation is the
// value the mutation writes, and the pod spec holds every entry the
// mutation merges (podSpecCarries). It reads the Binding as params, not
// the policy's variables, which a match condition cannot.
func carried(p celPaths, shapes []shapePath) string {
	recorded := "has(object.metadata.annotations) && '" + BoundAnnotation + "' in object.metadata.annotations && " +
		"object.metadata.annotations['" + BoundAnnotation + "'] == " + boundValue(p.others, p.entry)
	return "(" + recorded + " && (" + byShape(shapes, func(path string) string { return podSpecCarries(p.declared, path) }, "true") + "))"
}

// The rollout annotations the policy reads (psbinding's, repeated):
// RolloutMaxChangingAnnotation, RolloutPausedAnnotation and
// RolloutUndoAnnotation on a Binding, HeldAnnotation on a subject.
const (
	RolloutMaxChangingAnnotation = "rollout.bindings.bindkit.dev/max-changing"
	RolloutPausedAnnotation      = "rollout.bindings.bindkit.dev/paused"
	RolloutUndoAnnotation        = "rollout.bindings.bindkit.dev/undo"
	HeldAnnotation               = "bindings.bindkit.dev/held"
)

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

// podSpecCarries is the CEL test that the pod spec at path holds every
// entry podSpecFields merges from the declared Spec at declared: its env
// entries and mounts in each of the workload's own containers (and init
// containers when the Spec says so), its containers, init containers and
// volumes, each equal as a whole to one of the object's. A pod spec
// missing on the way to path holds nothing.
func podSpecCarries(declared, path string) string {
	obj := "object." + path
	list := func(of, field string) string {
		return "(has(" + of + "." + field + ") ? " + of + "." + field + " : [])"
	}
	// every entry of the Spec's list field is in the object's list of.
	every := func(field, of string) string {
		return list(declared, field) + ".all(d, " + list(of, field) + ".exists(o, dyn(o) == dyn(d)))"
	}
	added := "(" + list(declared, "containers") + ".map(a, a.name) + " + list(declared, "initContainers") + ".map(a, a.name))"
	own := func(field string) string {
		return list(obj, field) + ".filter(c, !(c.name in " + added + ")).all(c, " + every("env", "c") + " && " + every("volumeMounts", "c") + ")"
	}
	var present []string
	fields := strings.Split(path, ".")
	for i := range fields {
		present = append(present, "has(object."+strings.Join(fields[:i+1], ".")+")")
	}
	initToo := "has(" + declared + ".initContainersToo) && " + declared + ".initContainersToo == true"
	return "(" + strings.Join(present, " && ") + " && " + own("containers") + " && (!(" + initToo + ") || " + own("initContainers") + ") && " +
		every("containers", obj) + " && " + every("initContainers", obj) + " && " + every("volumes", obj) + ")"
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

// MutatingPolicyObjects returns a kind's mutating policy and the set of
// its bindings, one per Binding refs lists (BindingSet), as Objects for a
// Reconciler, the same machinery that keeps the namespace guard
// programmed: the policy read through a lister limited to its name, the
// bindings through one of every MutatingAdmissionPolicyBinding. written,
// if set, is told each Binding whose binding was created or restored.
// Call it only when MutatingPoliciesServed says so; otherwise the kind is
// admitted by the webhook.
func MutatingPolicyObjects(opts MutatingPolicyOptions, kube kubernetes.Interface, policies admissionlisters.MutatingAdmissionPolicyLister, bindings admissionlisters.MutatingAdmissionPolicyBindingLister, fieldManager string, refs func() ([]BindingRef, error), written func(BindingRef), logger *zap.Logger) ([]Object, error) {
	m, err := MutatingPolicy(opts)
	if err != nil {
		return nil, err
	}
	type mapT = admissionregistrationv1.MutatingAdmissionPolicy
	return []Object{
		&Typed[mapT, *mapT]{
			Desired: m, Get: policies.Get, Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicies(),
			Spec:    func(o *mapT) any { return &o.Spec },
			SetSpec: func(dst, src *mapT) { dst.Spec = src.Spec },
			Kind:    "MutatingAdmissionPolicy", FieldManager: fieldManager,
		},
		&BindingSet{
			Options: opts, Refs: refs, Lister: bindings, Client: kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings(),
			FieldManager: fieldManager, Logger: logger, Written: written,
		},
	}, nil
}

// RemoveMutatingPolicy deletes the MutatingAdmissionPolicyBindings and
// then the MutatingAdmissionPolicy named name, when they exist: what a
// process admitting a kind by webhook does, once its webhook is
// programmed, with what an earlier process admitting it by policy left.
// Until then both admit a subject, which binds it once: the derived Do and
// the policy set entries by name.
func RemoveMutatingPolicy(ctx context.Context, kube kubernetes.Interface, name string) (removed bool, err error) {
	api := kube.AdmissionregistrationV1()
	removed, bindingsErr := removeBindings(ctx, api.MutatingAdmissionPolicyBindings(), name)
	switch err := api.MutatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); {
	case err == nil:
		removed = true
	case !apierrors.IsNotFound(err):
		return removed, errors.Join(bindingsErr, fmt.Errorf("MutatingAdmissionPolicy %s: delete: %w", name, err))
	}
	return removed, bindingsErr
}
