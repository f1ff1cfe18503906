package duck_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
)

// wholeDocumentDiff is the patch knative's psbinding sends: the diff of the
// two whole documents, before and after.
func wholeDocumentDiff(t testing.TB, before, after *duck.WithPod) []jsonpatch.Operation {
	t.Helper()
	ops, err := jsonpatch.CreatePatch(mustJSON(t, before), mustJSON(t, after))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// applied is doc after the JSON patch ops, as a generic document.
func applied(t testing.TB, doc []byte, ops []jsonpatch.Operation) (map[string]any, error) {
	t.Helper()
	if len(ops) == 0 {
		var m map[string]any
		return m, json.Unmarshal(doc, &m)
	}
	patch, err := jsonpatchv4.DecodePatch(mustJSON(t, ops))
	if err != nil {
		return nil, err
	}
	out, err := patch.Apply(doc)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}

// checkSameDocument fails t unless CreatePatch's field-level patch, applied
// to before's document, gives the object the whole-document diff gives.
func checkSameDocument(t testing.TB, before, after *duck.WithPod) {
	t.Helper()
	doc := mustJSON(t, before)
	ops, err := duck.PodSpecable().CreatePatch(before, after)
	if err != nil {
		t.Fatal(err)
	}
	got, err := applied(t, doc, ops)
	if err != nil {
		t.Fatalf("field-level patch %s does not apply to %s: %v", mustJSON(t, ops), doc, err)
	}
	whole := wholeDocumentDiff(t, before, after)
	want, err := applied(t, doc, whole)
	if err != nil {
		t.Fatalf("whole-document patch %s does not apply to %s: %v", mustJSON(t, whole), doc, err)
	}
	if diff := cmp.Diff(asDecoded(t, want), asDecoded(t, got)); diff != "" {
		t.Errorf("field-level patch %s gives another object than the whole-document diff %s (-whole +field):\n%s",
			mustJSON(t, ops), mustJSON(t, whole), diff)
	}
}

// asDecoded is doc as the kube-apiserver keeps it: decoded into the typed
// object and written again. The two patches may leave different JSON for
// the same object: where a Binding empties a struct that omitempty does
// not leave out of JSON (a container's resources), CreatePatch removes the
// member and the whole-document diff leaves it as {}.
func asDecoded(t testing.TB, doc map[string]any) map[string]any {
	t.Helper()
	w, err := duck.PodSpecable().Decode(mustJSON(t, doc))
	if err != nil {
		t.Fatalf("patched document does not decode: %v", err)
	}
	return toMap(t, w)
}

var benchBinding = duck.BoundBy{Resource: schema.GroupResource{Group: "bindings.bindkit.dev", Resource: "githubbindings"}, Name: "gh", UID: "u-1"}

// bindAll is what a typical Do does, with the bound record: an env var
// and a mount on every container and init container, and a volume.
func bindAll(w *duck.WithPod) {
	spec := &w.Spec.Template.Spec
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			addEnv(&cs[i], "GITHUB_TOKEN", "t")
			cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: "bound", MountPath: "/bound"})
		}
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "bound", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}})
	duck.MarkBound(w, benchBinding, 3)
}

func TestCreatePatchGivesTheWholeDocumentDiffsDocument(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		mutate func(*duck.WithPod)
	}{
		{"realistic, bound", string(mustJSON(t, realisticDeployment())), bindAll},
		{"realistic, unbound after bound", string(mustJSON(t, realisticDeployment())), func(w *duck.WithPod) {
			spec := &w.Spec.Template.Spec
			spec.Containers[0].Env = spec.Containers[0].Env[1:]
			spec.Volumes = nil
			duck.MarkUnbound(w, benchBinding)
		}},
		{"no metadata, no template metadata", `{"spec":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`, bindAll},
		{"empty lists", `{"metadata":{"name":"w"},"spec":{"template":{"spec":{"containers":[{"name":"a","env":[],"volumeMounts":[]}],"volumes":[]}}}}`, bindAll},
		{"container added and removed", string(mustJSON(t, realisticDeployment())), func(w *duck.WithPod) {
			spec := &w.Spec.Template.Spec
			spec.InitContainers = nil
			spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: "s:1"})
		}},
		{"value changed in place, label set", string(mustJSON(t, realisticDeployment())), func(w *duck.WithPod) {
			w.Spec.Template.Spec.Containers[0].Env[0].Value = "changed"
			w.Spec.Template.Labels["bound"] = "yes"
			w.Labels = map[string]string{"only": "one"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := duck.PodSpecable().Decode(withPodDocument(t, []byte(tc.raw)))
			if err != nil {
				t.Fatal(err)
			}
			after := before.DeepCopy()
			tc.mutate(after)
			checkSameDocument(t, before, after)
		})
	}
}

// withPodDocument is raw as WithPod writes it: the document both patches apply
// to, so that neither is compared on members WithPod does not know.
func withPodDocument(t testing.TB, raw []byte) []byte {
	t.Helper()
	w, err := duck.PodSpecable().Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, w)
}

// FuzzCreatePatchGivesTheWholeDocumentDiffsDocument decodes an arbitrary
// workload, applies the changes a script of bytes describes (what Bindings
// do: env vars, mounts, volumes, containers, labels, annotations, the
// bound record) and checks that the field-level patch gives the document
// the whole-document diff gives. Seeds live in
// testdata/fuzz/FuzzCreatePatchGivesTheWholeDocumentDiffsDocument.
func FuzzCreatePatchGivesTheWholeDocumentDiffsDocument(f *testing.F) {
	f.Add(mustJSON(f, realisticDeployment()), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"a","env":[{"name":"X"}]}]}}}}`), []byte{1, 0, 9, 0, 0, 3})
	f.Add([]byte(`{"metadata":{"annotations":{"a":"b"}},"spec":{"template":{"metadata":{"labels":{"x":"y"}},"spec":{"initContainers":[{"name":"i"}],"containers":[]}}}}`), []byte{5, 2, 6, 1, 7, 0, 8, 4})
	f.Fuzz(func(t *testing.T, raw, script []byte) {
		w, err := duck.PodSpecable().Decode(raw)
		if err != nil {
			return
		}
		doc, err := json.Marshal(w)
		if err != nil {
			return // not every decoded value encodes (an invalid quantity, say)
		}
		before, err := duck.PodSpecable().Decode(doc)
		if err != nil {
			t.Fatalf("WithPod's own document does not decode: %v\n%s", err, doc)
		}
		after := before.DeepCopy()
		for i := 0; i+1 < len(script) && i < 64; i += 2 {
			change(after, script[i], script[i+1])
		}
		checkSameDocument(t, before, after)
	})
}

// change applies to w the change op names, on the element at names.
func change(w *duck.WithPod, op, at byte) {
	spec := &w.Spec.Template.Spec
	cs := &spec.Containers
	if op&0x80 != 0 {
		cs = &spec.InitContainers
	}
	name := fmt.Sprintf("n%d", at%4)
	var c *corev1.Container
	if len(*cs) > 0 {
		c = &(*cs)[int(at)%len(*cs)]
	}
	switch op % 10 {
	case 0:
		if c != nil {
			addEnv(c, name, "v")
		}
	case 1:
		if c != nil && len(c.Env) > 0 {
			i := int(at) % len(c.Env)
			c.Env = append(c.Env[:i:i], c.Env[i+1:]...)
		}
	case 2:
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	case 3:
		if len(spec.Volumes) > 0 {
			i := int(at) % len(spec.Volumes)
			spec.Volumes = append(spec.Volumes[:i:i], spec.Volumes[i+1:]...)
		}
	case 4:
		if c != nil {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/" + name})
		}
	case 5:
		*cs = append(*cs, corev1.Container{Name: name, Image: "i"})
	case 6:
		if len(*cs) > 0 {
			i := int(at) % len(*cs)
			*cs = append((*cs)[:i:i], (*cs)[i+1:]...)
		}
	case 7:
		if w.Spec.Template.Annotations == nil {
			w.Spec.Template.Annotations = map[string]string{}
		}
		w.Spec.Template.Annotations[name] = "a"
	case 8:
		duck.MarkBound(w, benchBinding, int64(at))
	case 9:
		if c != nil && len(c.Env) > 0 {
			c.Env[int(at)%len(c.Env)].Value = name
		}
	}
}
