package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
)

// SubjectVerb is the verb a Binding's author must hold on every subject
// the Binding can reach: what changing a workload's pod template takes
// through the API.
const SubjectVerb = "patch"

// MaxNamesChecked is how many distinct names of one Reference the authority
// policy checks one by one. A Binding naming more objects of a Reference
// than that must come from a user who holds the Reference's verb on every
// object of its resource in the namespace: the kube-apiserver allows an
// expression two authorization checks, and a policy a few dozen, so the
// number of checks has to be bounded whatever a Binding holds.
const MaxNamesChecked = 6

// maxChecks bounds the authorization checks of one evaluation of the
// policy: the kube-apiserver's runtime budget for a policy binding
// (10,000,000) over the cost of a check (350,000), with room for the rest.
const maxChecks = 25

// SubjectKind maps a kind a Binding's subject may name to its resource,
// for the authority policy, which cannot ask discovery: an authorization
// check names a resource, a subject reference names a kind.
type SubjectKind struct {
	// Group is the kind's API group, "" for the core group.
	Group string
	// Kind is the kind, e.g. "Deployment".
	Kind string
	// Resource is its resource, e.g. "deployments".
	Resource string
}

// BuiltInSubjectKinds are the built-in kinds with a pod template that a
// Binding may name: the workloads of apps and batch, bare Pods and
// ReplicationControllers.
func BuiltInSubjectKinds() []SubjectKind {
	return []SubjectKind{
		{"apps", "Deployment", "deployments"}, {"apps", "StatefulSet", "statefulsets"},
		{"apps", "DaemonSet", "daemonsets"}, {"apps", "ReplicaSet", "replicasets"},
		{"batch", "Job", "jobs"}, {"batch", "CronJob", "cronjobs"},
		{"", "Pod", "pods"}, {"", "ReplicationController", "replicationcontrollers"},
	}
}

// Reference is a kind of object a Binding names in its spec and whose
// content reaches the subjects (a Secret whose data a Binding copies into
// env, say): its author must hold Verb on each object named.
type Reference struct {
	// Paths are where the Binding names such objects: dotted paths from
	// the Binding's root to a string field holding an object's name, in
	// the Binding's namespace. A segment ending in "[]" is a list, each of
	// whose items the rest of the path is read from, e.g.
	// "spec.sources[].secretName", or "spec.names[]" for a list of names.
	// A path that is absent from a Binding names nothing.
	Paths []string
	// Group and Resource are the named objects' resource, e.g. "" and
	// "secrets".
	Group    string
	Resource string
	// Verb is what the author must be allowed to do to each, e.g. "get".
	Verb string
}

// AuthorityOptions describe the Binding kind whose authority policy is
// built. Resource is required; the zero SubjectPath is DefaultSubjectPath,
// the zero Name is AuthorityName(Resource).
type AuthorityOptions struct {
	// Resource is the Binding kind's resource (group, version, resource).
	Resource schema.GroupVersionResource
	// SubjectPath is the dotted path of the Binding's subject reference (a
	// tracker.Reference).
	SubjectPath string
	// SubjectKinds are kinds, beside BuiltInSubjectKinds, that the kind's
	// Bindings may name: custom resources with a pod template. A subject
	// of a kind in neither list is allowed only to a user who may patch
	// every resource of its group (resource "*").
	SubjectKinds []SubjectKind
	// References are the objects, beside the subject, whose authority a
	// Binding needs from its author. Default: none.
	References []Reference
	// Name names both the policy and its binding.
	Name string
}

// AuthorityName is the default name of a Binding kind's authority policy:
// "authority." followed by its group resource.
func AuthorityName(gr schema.GroupResource) string { return "authority." + gr.String() }

// SpecChangedCondition names the match condition of the authority and
// requested-by policies: the request creates a Binding or changes its
// spec. Status writes (a subresource the policies do not match) and the
// controller's own writes of metadata (finalizers) are not checked
// against a user.
const SpecChangedCondition = "spec-changed"

// specChanged is SpecChangedCondition's expression.
const specChanged = "request.operation == 'CREATE' || (has(object.spec) != has(oldObject.spec)) || (has(object.spec) && object.spec != oldObject.spec)"

// Authority returns the ValidatingAdmissionPolicy and its binding that
// refuse, at create and at any update that changes its spec, a Binding
// reaching further than the requesting user may: the kube-apiserver checks,
// with its own authorizer (RBAC), that the user may SubjectVerb the
// subject the Binding names (that resource and name), or, for a subject
// selected by label, every object of its resource in the namespace; and
// the Verb of each Reference on each object named. This is RBAC's own
// rule for RoleBindings (no grant beyond its creator's rights), applied to
// a Binding: bindkit's controller may write every workload, a Binding
// carries no more than its author may.
//
// The refusal (Forbidden) is one line naming the user, the verb, the
// resource and the name:
//
//	user "alice" may not patch deployments.apps "web" in namespace "team-a", which this Binding's subject names; a Binding changes only what its author may
//
// Its failurePolicy is Fail: a policy that cannot evaluate refuses the
// Binding's write (only Bindings of this kind), never lets it through.
func Authority(opts AuthorityOptions) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	name, err := opts.name()
	if err != nil {
		return nil, nil, err
	}
	validations, variables, err := opts.validations()
	if err != nil {
		return nil, nil, err
	}
	fail := admissionregistrationv1.Fail
	labels := map[string]string{ManagedByLabel: "bindkit"}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: bindingWrites(opts.Resource),
			MatchConditions:  []admissionregistrationv1.MatchCondition{{Name: SpecChangedCondition, Expression: specChanged}},
			Variables:        variables,
			Validations:      validations,
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

// bindingWrites matches creates and updates of gvr's objects (not their
// status), with the defaults the kube-apiserver fills in, so that the
// stored spec equals the built one.
func bindingWrites(gvr schema.GroupVersionResource) *admissionregistrationv1.MatchResources {
	equivalent := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.AllScopes
	return &admissionregistrationv1.MatchResources{
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
	}
}

// name is the policy's name, checked, after checking Resource.
func (opts AuthorityOptions) name() (string, error) {
	gvr := opts.Resource
	if gvr.Group == "" || gvr.Version == "" || gvr.Resource == "" {
		return "", fmt.Errorf("policy: AuthorityOptions.Resource %q: group, version and resource are all required", gvr.String())
	}
	name := opts.Name
	if name == "" {
		name = AuthorityName(gvr.GroupResource())
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", fmt.Errorf("policy: AuthorityOptions.Name %q: %s", name, strings.Join(msgs, "; "))
	}
	return name, nil
}

// validations are the policy's checks, each with at most one
// authorization check (the kube-apiserver allows two per expression), and
// the variables they share.
func (opts AuthorityOptions) validations() ([]admissionregistrationv1.Validation, []admissionregistrationv1.Variable, error) {
	subjectPath, err := celPath("SubjectPath", opts.SubjectPath, DefaultSubjectPath)
	if err != nil {
		return nil, nil, fmt.Errorf("policy: AuthorityOptions: %w", errors.Unwrap(err))
	}
	kinds, err := opts.kindMap()
	if err != nil {
		return nil, nil, err
	}
	if n := 1 + len(opts.References)*(MaxNamesChecked+1); n > maxChecks {
		return nil, nil, fmt.Errorf("policy: AuthorityOptions.References: %d references take %d authorization checks, more than the %d a policy can make; merge references of the same resource and verb", len(opts.References), n, maxChecks)
	}
	s := "object." + subjectPath
	variables := []admissionregistrationv1.Variable{
		{Name: "user", Expression: "request.userInfo.username"},
		{Name: "bindingNamespace", Expression: "has(object.metadata.namespace) ? object.metadata.namespace : ''"},
		{Name: "hasSubject", Expression: hasChain(s)},
		{Name: "subjectGroup", Expression: s + ".apiVersion.contains('/') ? " + s + ".apiVersion.split('/')[0] : ''"},
		{Name: "subjectKinds", Expression: kinds},
		{Name: "subjectKey", Expression: "variables.subjectGroup + '/' + " + s + ".kind"},
		{Name: "subjectResource", Expression: "variables.subjectKey in variables.subjectKinds ? variables.subjectKinds[variables.subjectKey] : '*'"},
		{Name: "subjectNamespace", Expression: "has(" + s + ".namespace) && " + s + ".namespace != '' ? " + s + ".namespace : variables.bindingNamespace"},
		{Name: "subjectName", Expression: "has(" + s + ".name) ? " + s + ".name : ''"},
	}
	subject := "authorizer.group(variables.subjectGroup).resource(variables.subjectResource).namespace(variables.subjectNamespace)"
	validations := []admissionregistrationv1.Validation{{
		Expression: "!variables.hasSubject || (variables.subjectName != '' ? " + subject + ".name(variables.subjectName).check('" + SubjectVerb + "').allowed() : " +
			subject + ".check('" + SubjectVerb + "').allowed())",
		MessageExpression: "'user \"' + variables.user + '\" may not " + SubjectVerb + " ' + " +
			"(variables.subjectResource == '*' ? 'every resource of group \"' + variables.subjectGroup + '\" (kind ' + variables.subjectKey + ' is not one the Binding kind declares)' : " +
			"variables.subjectResource + (variables.subjectGroup == '' ? '' : '.' + variables.subjectGroup)) + " +
			"(variables.subjectName != '' ? ' \"' + variables.subjectName + '\"' : ' (every name: the subject selects by label)') + " +
			"' in namespace \"' + variables.subjectNamespace + '\", which this Binding\\'s subject names; a Binding changes only what its author may'",
		Reason: ptr(metav1.StatusReasonForbidden),
	}}
	for i, ref := range opts.References {
		vars, checks, err := ref.checks(i)
		if err != nil {
			return nil, nil, fmt.Errorf("policy: AuthorityOptions.References[%d]: %w", i, err)
		}
		variables = append(variables, vars...)
		validations = append(validations, checks...)
	}
	return validations, variables, nil
}

// kindMap is the CEL map literal from "group/Kind" to resource of the
// built-in and the declared subject kinds.
func (opts AuthorityOptions) kindMap() (string, error) {
	byKey := map[string]string{}
	for _, k := range BuiltInSubjectKinds() {
		byKey[k.Group+"/"+k.Kind] = k.Resource
	}
	for i, k := range opts.SubjectKinds {
		if msgs := validation.IsDNS1035Label(strings.ToLower(k.Kind)); k.Kind == "" || len(msgs) > 0 {
			return "", fmt.Errorf("policy: AuthorityOptions.SubjectKinds[%d].Kind %q: must be a kind's name, like Deployment", i, k.Kind)
		}
		if msgs := validation.IsDNS1123Subdomain(k.Resource); len(msgs) > 0 {
			return "", fmt.Errorf("policy: AuthorityOptions.SubjectKinds[%d].Resource %q: %s", i, k.Resource, strings.Join(msgs, "; "))
		}
		if k.Group != "" {
			if msgs := validation.IsDNS1123Subdomain(k.Group); len(msgs) > 0 {
				return "", fmt.Errorf("policy: AuthorityOptions.SubjectKinds[%d].Group %q: %s", i, k.Group, strings.Join(msgs, "; "))
			}
		}
		byKey[k.Group+"/"+k.Kind] = k.Resource
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	entries := make([]string, len(keys))
	for i, k := range keys {
		entries[i] = celString(k) + ": " + celString(byKey[k])
	}
	return "{" + strings.Join(entries, ", ") + "}", nil
}

// checks are the variables and validations of reference i: the distinct
// names it holds, each checked by name when there are at most
// MaxNamesChecked, else the verb on every name.
func (ref Reference) checks(i int) ([]admissionregistrationv1.Variable, []admissionregistrationv1.Validation, error) {
	if err := ref.validate(); err != nil {
		return nil, nil, err
	}
	lists := make([]string, len(ref.Paths))
	for j, p := range ref.Paths {
		l, err := namesAt(p)
		if err != nil {
			return nil, nil, fmt.Errorf("Paths[%d]: %w", j, err)
		}
		lists[j] = l
	}
	names := "reference" + strconv.Itoa(i)
	vars := []admissionregistrationv1.Variable{{Name: names, Expression: "(" + strings.Join(lists, " + ") + ").distinct()"}}
	v := "variables." + names
	check := "authorizer.group(" + celString(ref.Group) + ").resource(" + celString(ref.Resource) + ").namespace(variables.bindingNamespace)"
	resource := ref.Resource
	if ref.Group != "" {
		resource += "." + ref.Group
	}
	prefix := "'user \"' + variables.user + '\" may not " + ref.Verb + " " + resource + " '"
	suffix := " + ' in namespace \"' + variables.bindingNamespace + '\", which this Binding names (" + strings.Join(ref.Paths, ", ") + "); a Binding carries only what its author may'"
	var validations []admissionregistrationv1.Validation
	for n := range MaxNamesChecked {
		at := v + "[" + strconv.Itoa(n) + "]"
		validations = append(validations, admissionregistrationv1.Validation{
			Expression: "size(" + v + ") <= " + strconv.Itoa(n) + " || size(" + v + ") > " + strconv.Itoa(MaxNamesChecked) + " || " +
				check + ".name(" + at + ").check(" + celString(ref.Verb) + ").allowed()",
			MessageExpression: prefix + " + '\"' + " + at + " + '\"'" + suffix,
			Reason:            ptr(metav1.StatusReasonForbidden),
		})
	}
	validations = append(validations, admissionregistrationv1.Validation{
		Expression:        "size(" + v + ") <= " + strconv.Itoa(MaxNamesChecked) + " || " + check + ".check(" + celString(ref.Verb) + ").allowed()",
		MessageExpression: prefix + " + '(every name: this Binding names ' + string(size(" + v + ")) + ', more than the " + strconv.Itoa(MaxNamesChecked) + " checked one by one)'" + suffix,
		Reason:            ptr(metav1.StatusReasonForbidden),
	})
	return vars, validations, nil
}

// validate reports the first problem with ref's resource and verb.
func (ref Reference) validate() error {
	if len(ref.Paths) == 0 {
		return errors.New("Paths: at least one path is required")
	}
	if msgs := validation.IsDNS1123Subdomain(ref.Resource); len(msgs) > 0 {
		return fmt.Errorf("Resource %q: %s", ref.Resource, strings.Join(msgs, "; "))
	}
	if ref.Group != "" {
		if msgs := validation.IsDNS1123Subdomain(ref.Group); len(msgs) > 0 {
			return fmt.Errorf("Group %q: %s", ref.Group, strings.Join(msgs, "; "))
		}
	}
	if ref.Verb == "" {
		return errors.New("Verb: required, e.g. get")
	}
	if msgs := validation.IsDNS1123Label(ref.Verb); len(msgs) > 0 {
		return fmt.Errorf("Verb %q: must be a verb like get: %s", ref.Verb, strings.Join(msgs, "; "))
	}
	return nil
}

// namesAt is the CEL expression of the list of non-empty strings at path
// in object (see Reference.Paths).
func namesAt(path string) (string, error) {
	segments := strings.Split(path, ".")
	for i, s := range segments {
		f := strings.TrimSuffix(s, "[]")
		if msgs := validation.IsCIdentifier(f); len(msgs) > 0 {
			return "", fmt.Errorf("%q: field %d %q: %s", path, i, f, strings.Join(msgs, "; "))
		}
	}
	return namesUnder("object", segments, 0), nil
}

// namesUnder is namesAt for the segments below base, whose list iteration
// variables are named from depth on.
func namesUnder(base string, segments []string, depth int) string {
	var fields []string
	for i, s := range segments {
		if !strings.HasSuffix(s, "[]") {
			fields = append(fields, s)
			continue
		}
		list := base + "." + strings.Join(append(fields, strings.TrimSuffix(s, "[]")), ".")
		rest := segments[i+1:]
		if len(rest) == 0 {
			return "(" + hasChain(list) + " ? " + list + ".filter(n, n != '') : [])"
		}
		x := "x" + strconv.Itoa(depth)
		return "(" + hasChain(list) + " ? " + list + ".map(" + x + ", " + namesUnder(x, rest, depth+1) + ").flatten() : [])"
	}
	field := base + "." + strings.Join(fields, ".")
	return "(" + hasChain(field) + " && " + field + " != '' ? [" + field + "] : [])"
}

// hasChain is the CEL test that each step of the dotted path p (its first
// element a variable) is present.
func hasChain(p string) string {
	parts := strings.Split(p, ".")
	tests := make([]string, 0, len(parts)-1)
	for i := 2; i <= len(parts); i++ {
		tests = append(tests, "has("+strings.Join(parts[:i], ".")+")")
	}
	return strings.Join(tests, " && ")
}

// celString is s as a CEL string literal.
func celString(s string) string { return strconv.Quote(s) }

// AuthorityObjects returns the authority policy as Objects for a
// Reconciler, reading through the given listers (informers limited to the
// policy's name) and writing with kube.
func AuthorityObjects(opts AuthorityOptions, kube kubernetes.Interface, policies admissionlisters.ValidatingAdmissionPolicyLister, bindings admissionlisters.ValidatingAdmissionPolicyBindingLister, fieldManager string) ([]Object, error) {
	vap, binding, err := Authority(opts)
	if err != nil {
		return nil, err
	}
	return validatingObjects(vap, binding, kube, policies, bindings, fieldManager), nil
}
