package bindingtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

// ContractOptions configure CheckContract. The zero value checks a Binding
// whose Do and Undo need no context of their own on Subjects.
type ContractOptions struct {
	// Subjects are the workloads to bind. Default: Subjects(the Binding's
	// namespace).
	Subjects []Subject
	// WithContext, if set, prepares the context Do and Undo run in, as the
	// framework calls it (wiring.Options.WithContext).
	WithContext psbinding.BindableContext
}

// CheckContract checks that b's Do and Undo keep the promises the
// framework relies on, on each subject (a subtest each), the way the
// reconciler applies them: decoded into a *duck.WithPod through the
// subject's duck.Shape, changed by Do or Undo, turned into a JSON patch by
// the shape's CreatePatch, guarded as the reconciler guards it
// (duck.Guard), and applied to the full object by the JSON patch
// implementation the kube-apiserver uses. For each subject:
//
//   - Do's patch applies, and the patched object holds what Do made;
//   - fields Go's types do not know (UnknownField) survive it, unless Do
//     removed what held them;
//   - Do is idempotent: Do on the subject it bound patches nothing;
//   - Undo restores: Undo after Do gives back the subject as it was before
//     Do, field for field;
//   - Undo of a subject Do never bound patches nothing.
//
// Each broken promise is reported with t.Errorf and a diff; a Do that
// changes none of the subjects fails too, since then the checks prove
// nothing (a Do that needs a context from WithContext sees none without
// it).
func CheckContract(t *testing.T, b psbinding.Bindable, opts ContractOptions) {
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
	changed := 0
	for _, s := range subjects {
		t.Run(s.Name, func(t *testing.T) {
			c := &checker{}
			if c.subject(ctx, b, s) {
				changed++
			}
			for _, p := range c.problems {
				t.Error(p)
			}
		})
	}
	if changed == 0 && len(subjects) > 0 {
		t.Errorf("Do of binding %s/%s changed none of the %d subjects: the contract holds trivially and proves nothing (does Do need ContractOptions.WithContext?)",
			b.GetNamespace(), b.GetName(), len(subjects))
	}
}

// checker collects the broken promises of one subject.
type checker struct {
	problems []string
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
		c.errorf("Undo of a subject Do never bound changes it, so the reconciler would patch every subject it unbinds that was never bound:\n%s\npatch:\n%s",
			cmp.Diff(before, undone), formatOps(ops))
	}

	// Do, as a patch applied to the whole object.
	after := before.DeepCopy()
	b.Do(ctx, after)
	ops := c.createPatch(s.Shape, before, after)
	if len(ops) == 0 {
		return false
	}
	boundJSON, ok := c.applyPatch("Do", orig.Object, origJSON, ops)
	if !ok {
		return true
	}
	bound := decodeJSON(boundJSON)
	for _, m := range lostUnknownFields(decodeJSON(origJSON), bound) {
		c.errorf("Do's patch lost %s (%q), a field Go's types do not know, standing for one a newer API server has: change the fields you bind in place rather than rebuilding what holds them\npatch:\n%s",
			m.path, m.value, formatOps(ops))
	}
	reBound, err := s.Shape.FromUnstructured(&unstructured.Unstructured{Object: bound})
	if err != nil {
		c.errorf("decode the bound subject: %v", err)
		return true
	}
	if diff := cmp.Diff(after.Spec.Template, reBound.Spec.Template, cmpopts.EquateEmpty()); diff != "" {
		c.errorf("the patched subject's pod template is not what Do made (-Do +patched):\n%s\npatch:\n%s", diff, formatOps(ops))
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
		c.errorf("Do is not idempotent: on the subject it bound it changes (-bound +Do again):\n%s\npatch:\n%s",
			cmp.Diff(reBound.Spec.Template, again.Spec.Template), formatOps(ops))
	}

	// Undo of what Do bound restores the subject.
	unbound := reBound.DeepCopy()
	b.Undo(ctx, unbound)
	undoOps := c.createPatch(s.Shape, reBound, unbound)
	restoredJSON, ok := c.applyPatch("Undo", bound, boundJSON, undoOps)
	if !ok {
		return true
	}
	// An empty list where the subject had none is what Go's omitempty
	// fields make of it on the API server: no difference.
	if diff := cmp.Diff(withoutEmpty(decodeJSON(origJSON)), withoutEmpty(decodeJSON(restoredJSON))); diff != "" {
		c.errorf("Undo after Do does not restore the subject (-before Do +after Undo):\n%s\nDo's patch:\n%s\nUndo's patch:\n%s",
			diff, formatOps(ops), formatOps(undoOps))
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
func (c *checker) applyPatch(what string, obj map[string]any, doc []byte, ops []jsonpatch.Operation) ([]byte, bool) {
	if len(ops) == 0 {
		return doc, true
	}
	guarded, err := duck.Guard(obj, ops)
	if err != nil {
		c.errorf("%s: guard the patch: %v\npatch:\n%s", what, err, formatOps(ops))
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
		c.errorf("%s: the patch does not apply to the subject: %v\npatch:\n%s", what, err, formatOps(guarded))
		return nil, false
	}
	return out, true
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

// formatOps writes one operation a line.
func formatOps(ops []jsonpatch.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		value, _ := json.Marshal(op.Value)
		fmt.Fprintf(&b, "  %s %s %s\n", op.Operation, op.Path, value)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// marker is an UnknownField found in an object.
type marker struct {
	path  string // for messages: spec.template.spec.containers[app].bindkitTestUnknownField
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
