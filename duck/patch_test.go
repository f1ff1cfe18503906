package duck_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

// formatOps renders operations as "op path value" lines, values as JSON.
func formatOps(t testing.TB, ops []jsonpatch.Operation) []string {
	t.Helper()
	var out []string
	for _, op := range ops {
		line := op.Operation + " " + op.Path
		if op.Operation != "remove" {
			line += " " + string(mustJSON(t, op.Value))
		}
		out = append(out, line)
	}
	return out
}

func deploymentDoc(t testing.TB) map[string]any {
	doc := toMap(t, realisticDeployment())
	// Fields WithPod does not know, at every level a patch goes through.
	doc["spec"].(map[string]any)["x-unknown"] = "spec"
	tmpl := doc["spec"].(map[string]any)["template"].(map[string]any)
	tmpl["x-unknown"] = "template"
	tmpl["metadata"].(map[string]any)["x-unknown"] = "template metadata"
	podSpec := tmpl["spec"].(map[string]any)
	podSpec["x-unknown"] = "pod spec"
	c0 := podSpec["containers"].([]any)[0].(map[string]any)
	c0["x-unknown"] = "container 0"
	c0["env"].([]any)[2].(map[string]any)["x-unknown"] = "env 2"
	doc["status"] = map[string]any{"replicas": 3.0}
	return doc
}

func cronJobDoc(t testing.TB) map[string]any {
	d := realisticDeployment()
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	cj := &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "shop", Labels: map[string]string{"app": "nightly"}},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: d.Spec.Template},
		}},
	}
	doc := toMap(t, cj)
	doc["spec"].(map[string]any)["jobTemplate"].(map[string]any)["x-unknown"] = "job template"
	return doc
}

func podDoc(t testing.TB) map[string]any {
	d := realisticDeployment()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Spec:       d.Spec.Template.Spec,
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	return toMap(t, pod)
}

func customDoc(t testing.TB) map[string]any {
	d := realisticDeployment()
	return map[string]any{
		"apiVersion": "example.bindkit.dev/v1", "kind": "Workload",
		"metadata": map[string]any{"name": "w", "namespace": "shop"},
		"spec": map[string]any{
			"x-unknown": "spec",
			"workload":  map[string]any{"replicas": 2.0, "template": toMap(t, d.Spec.Template)},
		},
	}
}

func addEnv(c *corev1.Container, name, value string) {
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func TestCreatePatch(t *testing.T) {
	tests := []struct {
		name   string
		shape  duck.Shape
		doc    func(testing.TB) map[string]any
		mutate func(*duck.WithPod)
		want   []string
	}{{
		name:   "no change",
		shape:  duck.PodSpecable(),
		doc:    deploymentDoc,
		mutate: func(*duck.WithPod) {},
	}, {
		name:  "semantically equal quantity",
		shape: duck.PodSpecable(),
		doc:   deploymentDoc,
		mutate: func(w *duck.WithPod) {
			w.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1000m")
		},
	}, {
		name:  "env, volume and mount added",
		shape: duck.PodSpecable(),
		doc:   deploymentDoc,
		mutate: func(w *duck.WithPod) {
			spec := &w.Spec.Template.Spec
			addEnv(&spec.Containers[0], "GITHUB_TOKEN", "t")
			spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "bound", MountPath: "/bound"})
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "bound", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}})
		},
		// PodSpec field order: volumes come before containers.
		want: []string{
			`add /spec/template/spec/volumes/3 {"name":"bound","secret":{"secretName":"s"}}`,
			`add /spec/template/spec/containers/0/env/4 {"name":"GITHUB_TOKEN","value":"t"}`,
			`add /spec/template/spec/containers/0/volumeMounts/2 {"name":"bound","mountPath":"/bound"}`,
		},
	}, {
		name:  "env removed from the middle",
		shape: duck.PodSpecable(),
		doc:   deploymentDoc,
		mutate: func(w *duck.WithPod) {
			c := &w.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env[:1:1], c.Env[2:]...)
		},
		want: []string{`remove /spec/template/spec/containers/0/env/1`},
	}, {
		name:  "value changed in place",
		shape: duck.PodSpecable(),
		doc:   deploymentDoc,
		mutate: func(w *duck.WithPod) {
			w.Spec.Template.Spec.Containers[1].Env[0].Value = "127.0.0.1:9000"
			w.Spec.Template.Spec.Containers[1].Image = "proxy:3"
		},
		want: []string{
			`replace /spec/template/spec/containers/1/image "proxy:3"`,
			`replace /spec/template/spec/containers/1/env/0/value "127.0.0.1:9000"`,
		},
	}, {
		name:  "field set and cleared",
		shape: duck.PodSpecable(),
		doc:   deploymentDoc,
		mutate: func(w *duck.WithPod) {
			w.Spec.Template.Spec.ServiceAccountName = ""
			w.Spec.Template.Spec.Containers[1].Env = nil
			w.Spec.Template.Spec.SecurityContext.RunAsNonRoot = new(true)
			w.Spec.Template.Spec.SecurityContext.FSGroup = nil
			w.Spec.Template.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
		},
		want: []string{
			`remove /spec/template/spec/containers/1/env`,
			`remove /spec/template/spec/serviceAccountName`,
			`add /spec/template/spec/securityContext/runAsNonRoot true`,
			`remove /spec/template/spec/securityContext/fsGroup`,
			`add /spec/template/spec/dnsConfig {"nameservers":["10.0.0.10"]}`,
		},
	}, {
		name:  "labels and annotations, keys escaped and sorted",
		shape: duck.PodSpecable(),
		doc:   deploymentDoc,
		mutate: func(w *duck.WithPod) {
			w.Labels["bindings.bindkit.dev/bound"] = "true"
			delete(w.Labels, "tier")
			w.Annotations = nil
			w.Spec.Template.Annotations["a~b"] = "1"
			w.Spec.Template.Labels = nil
		},
		want: []string{
			`add /metadata/labels/bindings.bindkit.dev~1bound "true"`,
			`remove /metadata/labels/tier`,
			`remove /metadata/annotations`,
			`remove /spec/template/metadata/labels`,
			`add /spec/template/metadata/annotations/a~0b "1"`,
		},
	}, {
		name:  "cronjob template path",
		shape: duck.CronJob(),
		doc:   cronJobDoc,
		mutate: func(w *duck.WithPod) {
			addEnv(&w.Spec.Template.Spec.Containers[1], "X", "y")
			w.Spec.Template.Labels["bound"] = "yes"
		},
		want: []string{
			`add /spec/jobTemplate/spec/template/metadata/labels/bound "yes"`,
			`add /spec/jobTemplate/spec/template/spec/containers/1/env/1 {"name":"X","value":"y"}`,
		},
	}, {
		name:  "pod: metadata and spec at the root",
		shape: duck.Pod(),
		doc:   podDoc,
		mutate: func(w *duck.WithPod) {
			addEnv(&w.Spec.Template.Spec.Containers[0], "X", "y")
			w.Spec.Template.Labels["bound"] = "yes"
			w.Annotations = map[string]string{"seen": "true"}
		},
		want: []string{
			`add /metadata/labels/bound "yes"`,
			`add /metadata/annotations {"seen":"true"}`,
			`add /spec/containers/0/env/4 {"name":"X","value":"y"}`,
		},
	}, {
		name:  "custom template path",
		shape: duck.TemplateAt("spec", "workload", "template"),
		doc:   customDoc,
		mutate: func(w *duck.WithPod) {
			w.Spec.Template.Spec.Volumes = w.Spec.Template.Spec.Volumes[:2]
		},
		want: []string{`remove /spec/workload/template/spec/volumes/2`},
	}, {
		name:  "template without metadata gets it whole",
		shape: duck.TemplateAt("spec", "workload", "template"),
		doc: func(t testing.TB) map[string]any {
			doc := customDoc(t)
			delete(doc["spec"].(map[string]any)["workload"].(map[string]any)["template"].(map[string]any), "metadata")
			return doc
		},
		mutate: func(w *duck.WithPod) { w.Spec.Template.Annotations = map[string]string{"a": "b"} },
		want:   []string{`add /spec/workload/template/metadata {"annotations":{"a":"b"}}`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.doc(t)
			raw := mustJSON(t, doc)
			before, err := tt.shape.Decode(raw)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			after := before.DeepCopy()
			tt.mutate(after)

			ops, err := tt.shape.CreatePatch(before, after)
			if err != nil {
				t.Fatalf("CreatePatch: %v", err)
			}
			if diff := cmp.Diff(tt.want, formatOps(t, ops)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}

			// The patched document decodes to after, and keeps every field
			// the duck type does not know.
			patched, err := applyPatch(toMap(t, doc), ops)
			if err != nil {
				t.Fatalf("apply patch: %v", err)
			}
			got, err := tt.shape.Decode(mustJSON(t, patched))
			if err != nil {
				t.Fatalf("Decode patched: %v", err)
			}
			if diff := cmp.Diff(toMap(t, canonical(tt.shape, after)), toMap(t, canonical(tt.shape, got))); diff != "" {
				t.Errorf("patched object as WithPod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(unknownFields(doc), unknownFields(patched)); diff != "" {
				t.Errorf("unknown fields after patch (-before +after):\n%s", diff)
			}
		})
	}
}

// canonical drops what a patch legitimately leaves different: under the Pod
// shape the object metadata and the template metadata are one.
func canonical(shape duck.Shape, w *duck.WithPod) *duck.WithPod {
	w = w.DeepCopy()
	if shape.String() == "pod" {
		w.Labels, w.Annotations = nil, nil
		w.Spec.Template.ObjectMeta = metav1.ObjectMeta{}
	}
	// Quantities compare by value, not by spelling.
	for i := range w.Spec.Template.Spec.Containers {
		for _, l := range []corev1.ResourceList{w.Spec.Template.Spec.Containers[i].Resources.Limits, w.Spec.Template.Spec.Containers[i].Resources.Requests} {
			for k, q := range l {
				l[k] = resource.MustParse(q.String())
			}
		}
	}
	return w
}

// unknownFields collects every "x-unknown" member and the status, keyed by
// value with the name of their parent, since removing a list element moves
// the ones after it.
func unknownFields(doc map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch n := v.(type) {
		case map[string]any:
			for k, c := range n {
				if k == "x-unknown" || k == "status" {
					out[fmt.Sprint(c)] = path[:strings.LastIndexAny(path, "/")+1]
					continue
				}
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range n {
				walk(path+"/"+strconv.Itoa(i), c)
			}
		}
	}
	walk("", doc)
	return out
}

func TestCreatePatchErrors(t *testing.T) {
	w := &duck.WithPod{}
	tests := []struct {
		name          string
		shape         duck.Shape
		before, after *duck.WithPod
	}{
		{"nil before", duck.PodSpecable(), nil, w},
		{"nil after", duck.PodSpecable(), w, nil},
		{"empty path segment", duck.TemplateAt("spec", ""), w, w},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ops, err := tt.shape.CreatePatch(tt.before, tt.after); err == nil {
				t.Errorf("CreatePatch = %v, want an error", ops)
			}
		})
	}
}

func TestCreatePatchDeterministic(t *testing.T) {
	before, err := duck.PodSpecable().Decode(mustJSON(t, realisticDeployment()))
	if err != nil {
		t.Fatal(err)
	}
	after := before.DeepCopy()
	for _, k := range []string{"z", "a", "m", "b/c", "q"} {
		after.Labels[k] = "1"
		after.Spec.Template.Spec.NodeSelector[k] = "1"
	}
	first, _ := duck.CreatePatch(before, after)
	for range 20 {
		again, _ := duck.CreatePatch(before, after)
		if diff := cmp.Diff(formatOps(t, first), formatOps(t, again)); diff != "" {
			t.Fatalf("patches of equal inputs differ (-first +again):\n%s", diff)
		}
	}
}

// TestCreatePatchAppliesWhereJSONIsNullOrAbsent covers what a typed diff
// cannot see: a zero value may be absent or null in the JSON, where no
// finer operation applies. Each patch is applied with the library the
// kube-apiserver applies webhook patches with.
func TestCreatePatchAppliesWhereJSONIsNullOrAbsent(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{{
		name: "null container",
		raw:  `{"metadata":{"name":"w"},"spec":{"template":{"spec":{"containers":[null,{"name":"b"}]}}}}`,
		want: `{"metadata":{"annotations":{"bound":"yes"},"name":"w"},"spec":{"template":{"spec":{"containers":[{"name":"","env":[{"name":"BOUND","value":"yes"}],"resources":{}},{"env":[{"name":"BOUND","value":"yes"}],"name":"b"}]}}}}`,
	}, {
		name: "no metadata",
		raw:  `{"spec":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`,
		want: `{"metadata":{"annotations":{"bound":"yes"}},"spec":{"template":{"spec":{"containers":[{"env":[{"name":"BOUND","value":"yes"}],"name":"a"}]}}}}`,
	}, {
		name: "null metadata",
		raw:  `{"metadata":null,"spec":{"template":{"metadata":null,"spec":{"containers":[{"name":"a","env":null}]}}}}`,
		want: `{"metadata":{"annotations":{"bound":"yes"}},"spec":{"template":{"metadata":null,"spec":{"containers":[{"env":[{"name":"BOUND","value":"yes"}],"name":"a"}]}}}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := duck.PodSpecable().Decode([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			after := before.DeepCopy()
			after.Annotations = map[string]string{"bound": "yes"}
			for i := range after.Spec.Template.Spec.Containers {
				addEnv(&after.Spec.Template.Spec.Containers[i], "BOUND", "yes")
			}
			ops, err := duck.PodSpecable().CreatePatch(before, after)
			if err != nil {
				t.Fatal(err)
			}
			patch, err := jsonpatchv4.DecodePatch(mustJSON(t, ops))
			if err != nil {
				t.Fatal(err)
			}
			got, err := patch.Apply([]byte(tt.raw))
			if err != nil {
				t.Fatalf("patch %s does not apply: %v", mustJSON(t, ops), err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("patched (-want +got):\n%s", diff)
			}
		})
	}
}
