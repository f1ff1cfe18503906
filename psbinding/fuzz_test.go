package psbinding

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/fixtures"
	"github.com/bindkit/bindkit/tracker"
)

// FuzzAdmit feeds arbitrary object bytes to a request that Bindings are in
// scope for: whatever arrives, admit answers (allowed, or a 400 or 413 that
// says what was wrong) and never panics; any patch it returns is valid JSON.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`))
	f.Add([]byte(`{"metadata":{"labels":{"app":"web"}},"spec":{"template":null}}`))
	f.Add([]byte(`{"metadata":{"labels":{"app":7}}}`))
	f.Add([]byte(`{"spec":{},"metadata":{"name":"web"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))

	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	var a admitter
	a.setIndex([]Bindable{
		newEnvBinding("ns", "exact", deploymentRef("ns", "web", nil), "EXACT", "1"),
		newEnvBinding("ns", "selector", deploymentRef("ns", "", sel), "SELECTED", "2"),
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp := a.admit(context.Background(), deploymentRequest(admissionv1.Create, "ns", "web", raw))
		if !resp.Allowed && (resp.Result == nil || (resp.Result.Code != 400 && resp.Result.Code != 413) || resp.Result.Message == "") {
			t.Fatalf("denied without a 400 or 413 and a message: %+v", resp.Result)
		}
		if len(resp.Patch) > 0 && !json.Valid(resp.Patch) {
			t.Fatalf("invalid patch JSON: %s", resp.Patch)
		}
	})
}

// richBinding is a test Binding that touches every part of a WithPod a
// patch can reach: an object annotation, a template label and annotation,
// a volume, and an env var and a mount in every container and init
// container. Undo removes all of it.
type richBinding struct {
	*envBinding
}

const (
	richVolume = "rich-binding"
	richEnv    = "RICH_BINDING"
	richKey    = "bindkit.dev/rich"
)

func newRichBinding(ns, name string, subject tracker.Reference) *richBinding {
	return &richBinding{newEnvBinding(ns, name, subject, richEnv, "yes")}
}

func (b *richBinding) DeepCopyObject() runtime.Object {
	return &richBinding{b.envBinding.DeepCopyObject().(*envBinding)}
}

func (b *richBinding) Do(_ context.Context, wp *duck.WithPod) {
	setKey(&wp.Annotations, richKey, b.Name)
	setKey(&wp.Spec.Template.Labels, richKey, "bound")
	setKey(&wp.Spec.Template.Annotations, richKey, b.Name)
	spec := &wp.Spec.Template.Spec
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == richVolume }) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: richVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: b.Name},
		}})
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == richEnv })
			c.Env = append(c.Env, corev1.EnvVar{Name: richEnv, Value: b.Name})
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == richVolume }) {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: richVolume, MountPath: "/var/run/rich", ReadOnly: true})
			}
		}
	}
}

func (b *richBinding) Undo(_ context.Context, wp *duck.WithPod) {
	delete(wp.Annotations, richKey)
	delete(wp.Spec.Template.Labels, richKey)
	delete(wp.Spec.Template.Annotations, richKey)
	spec := &wp.Spec.Template.Spec
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == richVolume })
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == richEnv })
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == richVolume })
		}
	}
}

func setKey(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// fuzzKind is one kind of subject FuzzAdmitPatchApplies sends, with the
// shape admit uses for it.
type fuzzKind struct {
	gvk   schema.GroupVersionKind
	shape duck.Shape
}

var widgetGK = schema.GroupKind{Group: "example.bindkit.dev", Kind: "Widget"}

var fuzzKinds = []fuzzKind{
	{appsv1.SchemeGroupVersion.WithKind("Deployment"), duck.PodSpecable()},
	{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), duck.PodSpecable()},
	{appsv1.SchemeGroupVersion.WithKind("DaemonSet"), duck.PodSpecable()},
	{batchv1.SchemeGroupVersion.WithKind("Job"), duck.PodSpecable()},
	{batchv1.SchemeGroupVersion.WithKind("CronJob"), duck.CronJob()},
	{corev1.SchemeGroupVersion.WithKind("Pod"), duck.Pod()},
	{widgetGK.WithVersion("v1"), duck.TemplateAt("spec", "workload", "template")},
}

// fuzzSeeds are realistic workloads of every shape, and the objects that
// found problems before: a null container, no metadata, duplicate keys,
// keys in the wrong case, escaped keys.
func fuzzSeeds(f *testing.F) {
	d := fixtures.RealisticDeployment("ns", "web")
	d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Env: []corev1.EnvVar{{Name: richEnv, Value: "stale"}}}}
	tmpl := d.Spec.Template
	add := func(kind int, v any) {
		raw, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), raw)
	}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"app": "web"}}
	}
	add(0, d)
	add(1, &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: meta(),
		Spec: appsv1.StatefulSetSpec{ServiceName: "web", Template: tmpl}})
	add(2, &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta(),
		Spec: appsv1.DaemonSetSpec{Template: tmpl}})
	add(3, &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: meta(),
		Spec: batchv1.JobSpec{Template: tmpl}})
	add(4, &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: meta(),
		Spec: batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}})
	add(5, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta(), Spec: tmpl.Spec})
	add(6, map[string]any{"apiVersion": "example.bindkit.dev/v1", "kind": "Widget", "metadata": meta(),
		"spec": map[string]any{"replicas": 2, "workload": map[string]any{"template": tmpl}}})
	for _, s := range []string{
		`{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"template":{"spec":{"containers":[null,{"name":"b"}]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`,
		`{"metadata":null,"spec":{"template":{"metadata":null,"spec":{"containers":[{}]}}}}`,
		`{"metadata":{"labels":{"app":"web"}},"metadata":{},"spec":{"template":{"spec":{}}}}`,
		`{"metadata":{"labels":{"app":"web"}},"SPEC":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`,
		`{"metadata":{"labels":{"app":"web"}},"sp\u0065c":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`,
		`{"metadata":{"labels":{"app":"web"}},"spec":{"template":{}}}`,
		`{"metadata":{"labels":{"app":"web"}},"spec":{"template":{"spec":{"containers":[{"name":"a","env":null,"volumeMounts":[]}],"volumes":null}}}}`,
	} {
		f.Add(uint8(0), []byte(s))
	}
}

// FuzzAdmitPatchApplies checks the promise the kube-apiserver relies on:
// every patch admit answers with applies to the object it was computed
// from, with the JSON patch library the kube-apiserver itself applies
// webhook patches with, and yields what the Bindings' Do and Undo made.
func FuzzAdmitPatchApplies(f *testing.F) {
	fuzzSeeds(f)
	var a admitter
	a.shapes = duck.Shapes{}.With(widgetGK, duck.TemplateAt("spec", "workload", "template"))
	var bindings []Bindable
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for _, k := range fuzzKinds {
		apiVersion, kind := k.gvk.ToAPIVersionAndKind()
		bindings = append(bindings,
			newRichBinding("ns", "rich-"+kind, tracker.Reference{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Selector: sel}),
			newRichBinding("ns", "rich-exact-"+kind, tracker.Reference{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Name: "web"}))
		old := newEnvBinding("ns", "old-"+kind, tracker.Reference{APIVersion: apiVersion, Kind: kind, Namespace: "ns", Name: "web"}, richEnv, "stale")
		now := metav1.Now()
		old.DeletionTimestamp = &now
		bindings = append(bindings, old)
	}
	if errs := a.setIndex(bindings); len(errs) > 0 {
		f.Fatalf("setIndex: %v", errs)
	}

	f.Fuzz(func(t *testing.T, kindSel uint8, raw []byte) {
		k := fuzzKinds[int(kindSel)%len(fuzzKinds)]
		req := &admissionv1.AdmissionRequest{
			UID:       "uid",
			Kind:      metav1.GroupVersionKind{Group: k.gvk.Group, Version: k.gvk.Version, Kind: k.gvk.Kind},
			Namespace: "ns",
			Name:      "web",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		}
		resp := a.admit(context.Background(), req)
		if !resp.Allowed {
			if resp.Result == nil || (resp.Result.Code != 400 && resp.Result.Code != 413) || resp.Result.Message == "" {
				t.Fatalf("refused without a 400 or 413 and a message: %+v", resp.Result)
			}
			return
		}
		before, err := k.shape.Decode(raw)
		if errors.Is(err, duck.ErrNoPodTemplate) {
			if len(resp.Patch) > 0 || len(resp.Warnings) == 0 {
				t.Fatalf("no template: patch %s, warnings %q; want no patch and a warning", resp.Patch, resp.Warnings)
			}
			return
		}
		if len(resp.Patch) == 0 {
			return
		}
		if err != nil {
			t.Fatalf("patched an object that does not decode: %v", err)
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("patch does not decode: %v\n%s", err, resp.Patch)
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("patch does not apply: %v\npatch: %s\nobject: %s", err, resp.Patch, raw)
		}
		got, err := k.shape.Decode(patched)
		if err != nil {
			t.Fatalf("patched object does not decode: %v\n%s", err, patched)
		}
		want := before.DeepCopy()
		for _, b := range a.index.Load().lookup(k.gvk.Group, k.gvk.Kind, "ns", "web", before.Labels) {
			if b.GetDeletionTimestamp() != nil {
				b.Undo(context.Background(), want)
			} else {
				b.Do(context.Background(), want)
			}
		}
		if !equality.Semantic.DeepEqual(want.Spec.Template.Spec, got.Spec.Template.Spec) {
			t.Fatalf("patched pod spec differs from Do's\npatch: %s\nobject: %s\npatched: %s", resp.Patch, raw, patched)
		}
		if k.shape.Path() == nil {
			// A Pod's metadata is its template's: the Bindings' keys are there.
			if got.Labels[richKey] != "bound" {
				t.Fatalf("patched pod lacks the template label: %v", got.Labels)
			}
			return
		}
		for what, pair := range map[string][2]map[string]string{
			"labels":               {want.Labels, got.Labels},
			"annotations":          {want.Annotations, got.Annotations},
			"template labels":      {want.Spec.Template.Labels, got.Spec.Template.Labels},
			"template annotations": {want.Spec.Template.Annotations, got.Spec.Template.Annotations},
		} {
			if !equality.Semantic.DeepEqual(pair[0], pair[1]) {
				t.Fatalf("patched %s = %v, want %v\npatch: %s", what, pair[1], pair[0], resp.Patch)
			}
		}
	})
}
