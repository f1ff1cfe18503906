package bindingtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
)

// ContractOptions configure CheckContract. The zero value checks a Binding
// whose Do and Undo need no context of their own on Subjects, without an
// API server.
type ContractOptions struct {
	// Subjects are the workloads to bind. Default: Subjects(the Binding's
	// namespace).
	Subjects []Subject
	// WithContext, if set, prepares the context Do and Undo run in, as the
	// framework calls it (wiring.Options.WithContext).
	WithContext psbinding.BindableContext
	// Env, if set, is a control plane on which CheckContract also checks
	// the built-in subjects the reconciler patches (Deployment, StatefulSet,
	// DaemonSet, ReplicaSet, CronJob; bare Pods and Jobs are bound at
	// admission only) as the kube-apiserver stores them: each created
	// in a namespace of its own (the server fills in its defaults:
	// terminationMessagePath, imagePullPolicy, a Pod's service account
	// token volume, ...), then bound and unbound with the JSON patches
	// the reconciler sends. This is what finds a
	// Do that deletes and re-appends what the server defaults, which the
	// reconciler would patch forever.
	Env *envtest.Environment
}

// CheckContract checks that b's Do and Undo keep the promises the
// framework relies on, on each subject, the way the reconciler applies
// them: decoded into a *duck.WithPod through the subject's duck.Shape,
// changed by Do or Undo, turned into a JSON patch by the shape's
// CreatePatch, guarded as the reconciler guards it (duck.Guard), and
// applied to the full object by the JSON patch implementation the
// kube-apiserver uses. For each subject:
//
//   - Do's patch applies, and the patched object holds what Do made;
//   - fields Go's types do not know (UnknownField) survive it, unless Do
//     removed what held them;
//   - Do is idempotent: Do on the subject it bound patches nothing;
//   - Undo restores: Undo after Do gives back the subject as it was before
//     Do, field for field;
//   - Undo of a subject Do never bound patches nothing;
//   - Do adds no container, init container, volume or env var without a
//     name (the mark of a Binding whose spec is not filled in) and none
//     whose name begins with KitNamePrefix.
//
// With opts.Env set, the same promises are checked again on the built-in
// subjects as the kube-apiserver stores them (see ContractOptions.Env).
//
// Each broken promise is reported once with t.Errorf at the caller's line,
// naming the subjects it breaks on and a diff or patch whose paths are
// relative to the pod template (template/spec/containers/1/...), so that
// one bug reads as one failure. A Do that changes none of the subjects
// fails too, since then the checks prove nothing (a Do that needs a
// context from WithContext sees none without it).
func CheckContract(t *testing.T, b psbinding.Bindable, opts ContractOptions) {
	t.Helper()
	for _, f := range contractFailures(t, b, opts) {
		t.Error(f)
	}
}

// contractFailures checks the contract and returns its failures, each a
// message for t.Error.
func contractFailures(t *testing.T, b psbinding.Bindable, opts ContractOptions) []string {
	t.Helper()
	ctx := t.Context()
	if opts.WithContext != nil {
		var err error
		if ctx, err = opts.WithContext(ctx, b); err != nil {
			t.Fatalf("WithContext of binding %s/%s: %v", b.GetNamespace(), b.GetName(), err)
		}
	}
	subjects := opts.Subjects
	if subjects == nil {
		subjects = Subjects(b.GetNamespace())
	}
	var problems problemSet
	changed := 0
	broken := map[string]bool{}
	for _, s := range subjects {
		c := &checker{}
		if c.subject(ctx, b, s) {
			changed++
		}
		problems.add(s.Name, c.problems)
		maps.Copy(broken, c.broken)
	}
	// On the server only what the check without one cannot see: a problem
	// found already would be found again, as a second report of one bug.
	if opts.Env != nil && len(problems.list) == 0 {
		ns := opts.Env.CreateNamespace(t, "bindingtest-contract-")
		client, err := dynamic.NewForConfig(opts.Env.Config)
		if err != nil {
			t.Fatalf("bindingtest: client of the control plane: %v", err)
		}
		for _, s := range subjects {
			if _, ok := serverResources[s.Object.GetKind()]; !ok || s.Object.GroupVersionKind().Group == CustomWorkloadKind.Group {
				continue
			}
			c := &checker{skip: broken}
			c.serverSubject(ctx, b, s, client, ns)
			problems.add(s.Name, c.problems) // the messages say "as the API server stores it"
		}
	}
	var out []string
	for _, p := range problems.list {
		out = append(out, fmt.Sprintf("binding %s/%s on %s: %s", b.GetNamespace(), b.GetName(), joinSubjects(p.subjects), p.text))
	}
	if changed == 0 && len(subjects) > 0 {
		out = append(out, fmt.Sprintf("Do of binding %s/%s changed none of the %d subjects: the contract holds trivially and proves nothing (is the Binding's spec filled in? does Do need ContractOptions.WithContext?)",
			b.GetNamespace(), b.GetName(), len(subjects)))
	}
	return out
}

// problemSet gathers the problems of every subject, each distinct text
// once, in the order first seen.
type problemSet struct {
	list  []*problem
	index map[string]*problem
}

type problem struct {
	text     string
	subjects []string
}

func (ps *problemSet) add(subject string, texts []string) {
	if ps.index == nil {
		ps.index = map[string]*problem{}
	}
	for _, text := range texts {
		p, ok := ps.index[text]
		if !ok {
			p = &problem{text: text}
			ps.index[text] = p
			ps.list = append(ps.list, p)
		}
		if !slices.Contains(p.subjects, subject) {
			p.subjects = append(p.subjects, subject)
		}
	}
}

func joinSubjects(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more (%s)", strings.Join(names[:2], ", "), len(names)-2, strings.Join(names[2:], ", "))
}

// checker collects the broken promises of one subject.
type checker struct {
	problems []string
	// broken holds the promises broken, by category; skip the categories
	// not to report (those the check without a server reported already).
	broken, skip map[string]bool
}

// broke reports a broken promise of a category, unless c skips it.
func (c *checker) broke(category, format string, args ...any) {
	if c.skip[category] {
		return
	}
	if c.broken == nil {
		c.broken = map[string]bool{}
	}
	c.broken[category] = true
	c.errorf(format, args...)
}

func (c *checker) errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// subject checks the contract on one subject and reports whether Do
// changed it.
func (c *checker) subject(ctx context.Context, b psbinding.Bindable, s Subject) bool {
	orig := s.Object.DeepCopy()
	origJSON, err := json.Marshal(orig.Object)
	if err != nil {
		c.errorf("encode subject: %v", err)
		return false
	}
	before, err := s.Shape.FromUnstructured(orig)
	if err != nil {
		c.errorf("decode subject through shape %s: %v", s.Shape, err)
		return false
	}

	// Undo of a subject never bound.
	undone := before.DeepCopy()
	b.Undo(ctx, undone)
	if ops := c.createPatch(s.Shape, before, undone); len(ops) > 0 {
		c.broke("unbound", "Undo of a subject Do never bound changes it, so the reconciler would patch every subject it unbinds that was never bound\npatch of Undo:\n%s",
			formatOps(s.Shape, ops))
	}

	// Do, as a patch applied to the whole object.
	after := before.DeepCopy()
	b.Do(ctx, after)
	ops := c.createPatch(s.Shape, before, after)
	if len(ops) == 0 {
		return false
	}
	c.names(before, after)
	boundJSON, ok := c.applyPatch(s.Shape, "Do", orig.Object, origJSON, ops)
	if !ok {
		return true
	}
	bound := decodeJSON(boundJSON)
	for _, m := range lostUnknownFields(decodeJSON(origJSON), bound) {
		c.errorf("Do's patch lost %s (%q), a field Go's types do not know, standing for one a newer API server has: change the fields you bind in place rather than rebuilding what holds them\npatch:\n%s",
			m.path, m.value, formatOps(s.Shape, ops))
	}
	reBound, err := s.Shape.FromUnstructured(&unstructured.Unstructured{Object: bound})
	if err != nil {
		c.errorf("decode the bound subject: %v", err)
		return true
	}
	if diff := cmp.Diff(after.Spec.Template, reBound.Spec.Template, cmpopts.EquateEmpty()); diff != "" {
		c.errorf("the patched subject's pod template is not what Do made (-Do +patched):\n%s\npatch:\n%s", diff, formatOps(s.Shape, ops))
	}
	if len(s.Shape.Path()) > 0 { // a Pod's metadata is its template's, compared above
		if diff := cmp.Diff([]map[string]string{after.Labels, after.Annotations}, []map[string]string{reBound.Labels, reBound.Annotations}, cmpopts.EquateEmpty()); diff != "" {
			c.errorf("the patched subject's labels and annotations are not what Do made (-Do +patched):\n%s", diff)
		}
	}

	// Do again, on the bound subject as the reconciler reads it.
	again := reBound.DeepCopy()
	b.Do(ctx, again)
	if ops := c.createPatch(s.Shape, reBound, again); len(ops) > 0 {
		c.broke("idempotent", "Do is not idempotent: on the subject it bound, Do changes it again, so the reconciler patches it forever\npatch of Do again:\n%s",
			formatOps(s.Shape, ops))
	}

	// Undo of what Do bound restores the subject.
	unbound := reBound.DeepCopy()
	b.Undo(ctx, unbound)
	undoOps := c.createPatch(s.Shape, reBound, unbound)
	restoredJSON, ok := c.applyPatch(s.Shape, "Undo", bound, boundJSON, undoOps)
	if !ok {
		return true
	}
	// An empty list where the subject had none is what Go's omitempty
	// fields make of it on the API server: no difference.
	if left := leftBehind(s.Shape, origJSON, restoredJSON); left != "" {
		c.broke("restore", "Undo after Do does not restore the subject; what Do made that Undo left (a patch from before Do to after Undo):\n%s\nDo's patch:\n%s\nUndo's patch:\n%s",
			left, formatOps(s.Shape, ops), formatOps(s.Shape, undoOps))
	}
	return true
}

func (c *checker) createPatch(shape duck.Shape, before, after *duck.WithPod) []jsonpatch.Operation {
	ops, err := shape.CreatePatch(before, after)
	if err != nil {
		c.errorf("create patch: %v", err)
	}
	return ops
}

// applyPatch guards ops against obj as the reconciler does and applies
// them to doc, obj's JSON, with the kube-apiserver's JSON patch
// implementation. It reports a failure and returns false.
func (c *checker) applyPatch(shape duck.Shape, what string, obj map[string]any, doc []byte, ops []jsonpatch.Operation) ([]byte, bool) {
	if len(ops) == 0 {
		return doc, true
	}
	guarded, err := duck.Guard(obj, ops)
	if err != nil {
		c.errorf("%s: guard the patch: %v\npatch:\n%s", what, err, formatOps(shape, ops))
		return nil, false
	}
	body, err := duck.MarshalPatch(guarded)
	if err != nil {
		c.errorf("%s: encode the patch: %v", what, err)
		return nil, false
	}
	patch, err := jsonpatchv4.DecodePatch(body)
	if err != nil {
		c.errorf("%s: the patch does not decode: %v\npatch: %s", what, err, body)
		return nil, false
	}
	out, err := patch.Apply(doc)
	if err != nil {
		c.errorf("%s: the patch does not apply to the subject: %v\npatch:\n%s", what, err, formatOps(shape, guarded))
		return nil, false
	}
	return out, true
}

// leftBehind returns, one operation a line, the patch from before to
// after (JSON of one subject) with empty lists dropped as the API server
// drops them, or "" when they agree.
func leftBehind(shape duck.Shape, before, after []byte) string {
	a, err := json.Marshal(withoutEmpty(decodeJSON(before)))
	if err != nil {
		return err.Error()
	}
	b, err := json.Marshal(withoutEmpty(decodeJSON(after)))
	if err != nil {
		return err.Error()
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return fmt.Sprintf("compare: %v", err)
	}
	if len(ops) == 0 {
		return ""
	}
	slices.SortFunc(ops, func(x, y jsonpatch.Operation) int { return strings.Compare(x.Path, y.Path) })
	return formatOps(shape, ops)
}

// names reports what Do added to after, beyond before, that has no name or
// a name of the kit's.
func (c *checker) names(before, after *duck.WithPod) {
	had := map[string]bool{}
	add := func(kind, name string) { had[kind+"/"+name] = true }
	check := func(kind, name string) {
		if had[kind+"/"+name] {
			return
		}
		switch {
		case name == "":
			c.errorf("Do adds a %s with an empty name: is the Binding's spec filled in? Give CheckContract a Binding whose spec is as a user writes it", kind)
		case strings.HasPrefix(name, KitNamePrefix):
			c.errorf("Do adds a %s named %q: names beginning with %q are the kit's subjects' own, so the contract check cannot tell the two apart; name it otherwise", kind, name, KitNamePrefix)
		}
	}
	eachName(&before.Spec.Template.Spec, add)
	eachName(&after.Spec.Template.Spec, check)
}

// eachName calls f with every named thing of spec a Binding may add.
func eachName(spec *corev1.PodSpec, f func(kind, name string)) {
	for _, list := range []struct {
		kind string
		cs   []corev1.Container
	}{{"init container", spec.InitContainers}, {"container", spec.Containers}} {
		for _, ctr := range list.cs {
			f(list.kind, ctr.Name)
			for _, e := range ctr.Env {
				f("env var in "+list.kind+" "+ctr.Name, e.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		f("volume", v.Name)
	}
}

// withoutEmpty drops, recursively, the object members whose value is null
// or an empty list.
func withoutEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if l, ok := child.([]any); child == nil || (ok && len(l) == 0) {
				delete(v, k)
				continue
			}
			v[k] = withoutEmpty(child)
		}
	case []any:
		for i := range v {
			v[i] = withoutEmpty(v[i])
		}
	}
	return v
}

// decodeJSON decodes what json.Marshal or a JSON patch made.
func decodeJSON(data []byte) map[string]any {
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("bindingtest: decode JSON this package encoded: %v", err))
	}
	return out
}

// formatOps writes one operation a line, its path relative to the pod
// template (templatePath) so that one problem reads the same on every
// shape.
func formatOps(shape duck.Shape, ops []jsonpatch.Operation) string {
	if len(ops) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, op := range ops {
		value, _ := json.Marshal(op.Value)
		fmt.Fprintf(&b, "  %s %s %s\n", op.Operation, templatePath(shape, op.Path), value)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// marker is an UnknownField found in an object.
type marker struct {
	path  string // for messages: spec.template.spec.containers[bindingtest-app].bindkitTestUnknownField
	steps []step
	value any
}

// step is one step of a path: a map key, or a list element found by its
// "name" (pod spec lists are keyed by name, and Do may insert before an
// element) or, without one, by its index.
type step struct {
	key   string
	name  string
	index int
	list  bool
}

// lostUnknownFields returns the UnknownField markers of before that after
// lacks while it still has what held them.
func lostUnknownFields(before, after map[string]any) []marker {
	var lost []marker
	for _, m := range markers(before, nil, "") {
		parent, ok := resolve(after, m.steps[:len(m.steps)-1])
		if !ok {
			continue // Do removed what held it
		}
		obj, _ := parent.(map[string]any)
		if v, found := obj[UnknownField]; !found || v != m.value {
			lost = append(lost, m)
		}
	}
	return lost
}

func markers(v any, steps []step, path string) []marker {
	var out []marker
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			s := append(append([]step(nil), steps...), step{key: k})
			p := strings.TrimPrefix(path+"."+k, ".")
			if k == UnknownField {
				out = append(out, marker{path: p, steps: s, value: child})
				continue
			}
			out = append(out, markers(child, s, p)...)
		}
	case []any:
		for i, child := range v {
			st := step{list: true, index: i}
			label := strconv.Itoa(i)
			if m, ok := child.(map[string]any); ok {
				if name, ok := m["name"].(string); ok && name != "" {
					st.name, label = name, name
				}
			}
			out = append(out, markers(child, append(append([]step(nil), steps...), st), path+"["+label+"]")...)
		}
	}
	return out
}

func resolve(v any, steps []step) (any, bool) {
	for _, s := range steps {
		switch {
		case s.list:
			list, ok := v.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for i, item := range list {
				m, _ := item.(map[string]any)
				if (s.name != "" && m["name"] == s.name) || (s.name == "" && i == s.index) {
					v, found = item, true
					break
				}
			}
			if !found {
				return nil, false
			}
		default:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.key]; !ok {
				return nil, false
			}
		}
	}
	return v, true
}
