package psbinding

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
)

// TestRecordChangeThenRollBack binds a Deployment under a policy that
// rolls back (the records go in the patch of the change), then rolls it
// back from what the records say: the template and the bound record are
// what they were, another Binding's records are untouched, and the
// Binding holds the subject.
func TestRecordChangeThenRollBack(t *testing.T) {
	by := duck.BoundBy{Resource: schema.GroupResource{Group: "test.bindkit.dev", Resource: "envbindings"}, Name: "env", UID: "u1"}
	other := duck.BoundBy{Resource: by.Resource, Name: "other", UID: "u2"}
	shape := duck.PodSpecable()
	d := testDeployment("ns", "web", nil, corev1.EnvVar{Name: "OWN", Value: "1"})
	d.Annotations = map[string]string{duck.BoundAnnotation: other.Entry(4), "kept": "yes"}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	before, err := shape.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	b := newEnvBinding("ns", "env", deploymentRef("ns", "web", nil), "FOO", "bar")
	b.SetGeneration(3)
	b.SetUID("u1")
	after, _, err := bindingStep(shape, before, application{b: b, bind: true, by: by, record: true})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Unix(1700000000, 0).UTC()
	w := work{name: "web", bind: true, paced: &duck.Change{Generation: 3, Wave: 2, Since: since}, rollback: true}
	marked, err := recordChange(shape, &observed{u: u}, by, 3, w, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if got := duck.ChangesOf(marked.Annotations)[by]; got != *w.paced {
		t.Errorf("rollout record %+v, want %+v", got, *w.paced)
	}
	rbs, err := duck.RollbacksOf(marked.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	if _, rb, ok := rbs.Find(by); !ok || rb.Bound != 0 || len(rb.Patch) < 3 {
		t.Fatalf("rollback record %+v, %v", rb, ok)
	}

	// The subject as the patch left it, and another Binding's change
	// since, elsewhere in the template.
	changed := u.DeepCopy()
	if err := shape.Apply(marked, changed); err != nil {
		t.Fatal(err)
	}
	changed.SetAnnotations(duck.SetChange(changed.GetAnnotations(), other, &duck.Change{Generation: 4, Wave: 1, Since: since}))
	ops, err := rollbackPatch(shape, changed, by, 3)
	if err != nil {
		t.Fatal(err)
	}
	rolledBack := applyOps(t, changed, ops)
	got, err := shape.FromUnstructured(rolledBack)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Spec.Template, got.Spec.Template); diff != "" {
		t.Errorf("template after the rollback (-before +after):\n%s", diff)
	}
	want := map[string]string{
		duck.BoundAnnotation:   other.Entry(4),
		duck.RolloutAnnotation: other.Entry(4) + ":1:1700000000",
		duck.HeldAnnotation:    by.Entry(3),
		"kept":                 "yes",
	}
	if diff := cmp.Diff(want, got.Annotations); diff != "" {
		t.Errorf("annotations after the rollback (-want +got):\n%s", diff)
	}
	// Rolled back already: nothing to do.
	if again, err := rollbackPatch(shape, rolledBack, by, 3); err != nil || again != nil {
		t.Errorf("a second rollback: %v, %v", again, err)
	}
}

// applyOps applies a JSON patch (add, remove, replace, test) to a copy of
// u, failing t on a failed test, as the API server would refuse it.
func applyOps(t *testing.T, u *unstructured.Unstructured, ops any) *unstructured.Unstructured {
	t.Helper()
	js, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(js, &list); err != nil {
		t.Fatal(err)
	}
	out := u.DeepCopy()
	for _, op := range list {
		path, _ := op["path"].(string)
		if err := patchAt(out.Object, splitPath(path), op["op"].(string), op["value"]); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
	}
	return out
}

func splitPath(p string) []string {
	var out []string
	for _, tok := range strings.Split(p[1:], "/") {
		out = append(out, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
	}
	return out
}

// patchAt applies one operation at path within doc.
func patchAt(doc any, path []string, op string, value any) error {
	parent, last := doc, path[len(path)-1]
	for _, tok := range path[:len(path)-1] {
		switch p := parent.(type) {
		case map[string]any:
			parent = p[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(p) {
				return fmt.Errorf("no element %s", tok)
			}
			parent = p[i]
		}
	}
	switch p := parent.(type) {
	case map[string]any:
		switch op {
		case "test":
			if !equality.Semantic.DeepEqual(normalize(p[last]), normalize(value)) {
				return fmt.Errorf("test failed: %v != %v", p[last], value)
			}
		case "remove":
			delete(p, last)
		default:
			p[last] = value
		}
	case []any:
		i, _ := strconv.Atoi(last)
		switch op {
		case "test":
			if i >= len(p) || !equality.Semantic.DeepEqual(normalize(p[i]), normalize(value)) {
				return fmt.Errorf("test failed at %d", i)
			}
		case "remove":
			return setParent(doc, path[:len(path)-1], append(p[:i:i], p[i+1:]...))
		case "add":
			if last == "-" {
				i = len(p)
			}
			return setParent(doc, path[:len(path)-1], append(p[:i:i], append([]any{value}, p[i:]...)...))
		default:
			p[i] = value
		}
	}
	return nil
}

// setParent replaces the list at path.
func setParent(doc any, path []string, list []any) error {
	return patchAt(doc, path, "replace", list)
}

// normalize makes JSON numbers comparable with what a decoder reads.
func normalize(v any) any {
	js, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(js, &out)
	return out
}
