package duck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

type shapeKind uint8

const (
	kindSpecTemplate shapeKind = iota // spec.template, the zero value
	kindRoot                          // the object is the template (Pod)
	kindPath                          // the template sits at path
)

// Shape says where a workload keeps its pod template, and converts between
// the workload and the one *WithPod that a Binding's Do and Undo see. The
// zero Shape is PodSpecable. A Shape is a small immutable value, safe to
// copy and to use from many goroutines.
type Shape struct {
	kind    shapeKind
	path    []string // for kindPath
	pointer string   // JSON pointer of the template, for kindPath
}

// PodSpecable is the shape of workloads with the pod template at
// spec.template: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and
// custom resources that follow the same convention.
func PodSpecable() Shape { return Shape{} }

// Pod is the shape of a bare Pod: its metadata and spec are the template.
// The WithPod it decodes has the Pod's metadata both as ObjectMeta and as
// Spec.Template.ObjectMeta, and the Pod's spec as Spec.Template.Spec.
func Pod() Shape { return Shape{kind: kindRoot} }

// CronJob is the shape of a batch CronJob, whose pod template is at
// spec.jobTemplate.spec.template.
func CronJob() Shape { return TemplateAt("spec", "jobTemplate", "spec", "template") }

// TemplateAt is the shape of a workload that keeps its pod template at the
// given field path, e.g. TemplateAt("spec", "workload", "template").
// TemplateAt("spec", "template") is PodSpecable and TemplateAt() is Pod.
// Conversions report an error for a path with an empty segment.
func TemplateAt(path ...string) Shape {
	switch {
	case len(path) == 0:
		return Pod()
	case len(path) == 2 && path[0] == "spec" && path[1] == "template":
		return PodSpecable()
	}
	var b strings.Builder
	for _, seg := range path {
		b.WriteByte('/')
		writeEscaped(&b, seg)
	}
	return Shape{kind: kindPath, path: append([]string(nil), path...), pointer: b.String()}
}

// Path returns the field path of the pod template, nil for the Pod shape.
func (s Shape) Path() []string {
	switch s.kind {
	case kindRoot:
		return nil
	case kindSpecTemplate:
		return []string{"spec", "template"}
	}
	return append([]string(nil), s.path...)
}

// String names the shape for logs: the dotted template path, or "pod".
func (s Shape) String() string {
	switch s.kind {
	case kindRoot:
		return "pod"
	case kindSpecTemplate:
		return "spec.template"
	}
	return strings.Join(s.path, ".")
}

// templatePointer is the JSON pointer of the template; "" for Pod.
func (s Shape) templatePointer() string {
	switch s.kind {
	case kindRoot:
		return ""
	case kindSpecTemplate:
		return "/spec/template"
	}
	return s.pointer
}

func (s Shape) validate() error {
	for _, seg := range s.path {
		if seg == "" {
			return fmt.Errorf("shape %q: empty path segment", s)
		}
	}
	return nil
}

// Decode reads a workload's JSON, e.g. the object of an AdmissionReview,
// into a new WithPod. A template missing from the JSON decodes as the zero
// template; a template path through something other than objects is an
// error.
func (s Shape) Decode(raw []byte) (*WithPod, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	w := &WithPod{}
	switch s.kind {
	case kindSpecTemplate:
		if err := json.Unmarshal(raw, w); err != nil {
			return nil, fmt.Errorf("decode %s workload: %w", s, err)
		}
		return w, nil
	case kindRoot:
		var pod struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata,omitempty"`
			Spec              corev1.PodSpec `json:"spec,omitempty"`
		}
		if err := json.Unmarshal(raw, &pod); err != nil {
			return nil, fmt.Errorf("decode pod: %w", err)
		}
		w.TypeMeta, w.ObjectMeta = pod.TypeMeta, pod.ObjectMeta
		pod.ObjectMeta.DeepCopyInto(&w.Spec.Template.ObjectMeta)
		w.Spec.Template.Spec = pod.Spec
		return w, nil
	}
	var top struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("decode %s workload: %w", s, err)
	}
	w.TypeMeta, w.ObjectMeta = top.TypeMeta, top.ObjectMeta
	cur := json.RawMessage(raw)
	for i, seg := range s.path {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(cur, &fields); err != nil {
			return nil, fmt.Errorf("%s: %s is not an object: %w", describe(w), strings.Join(s.path[:i], "."), err)
		}
		next, ok := fields[seg]
		if !ok || bytes.Equal(bytes.TrimSpace(next), []byte("null")) {
			return w, nil
		}
		cur = next
	}
	if err := json.Unmarshal(cur, &w.Spec.Template); err != nil {
		return nil, fmt.Errorf("%s: decode %s: %w", describe(w), s, err)
	}
	return w, nil
}

// FromUnstructured converts a workload, e.g. from the dynamic client, into a
// new WithPod that shares no memory with u. A template missing from u (or
// null) is an error wrapping ErrNoPodTemplate; a template path through
// something other than objects is another error.
func (s Shape) FromUnstructured(u *unstructured.Unstructured) (*WithPod, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	w := &WithPod{}
	conv := runtime.DefaultUnstructuredConverter
	if s.kind == kindSpecTemplate {
		if tmpl, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template"); !found || tmpl == nil {
			return nil, fmt.Errorf("%s: %w at %s", describeUnstructured(u), ErrNoPodTemplate, s)
		}
		if err := conv.FromUnstructured(u.UnstructuredContent(), w); err != nil {
			return nil, fmt.Errorf("%s: %w", describeUnstructured(u), err)
		}
		return w, nil
	}
	w.APIVersion, w.Kind = u.GetAPIVersion(), u.GetKind()
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		if err := conv.FromUnstructured(md, &w.ObjectMeta); err != nil {
			return nil, fmt.Errorf("%s: metadata: %w", describeUnstructured(u), err)
		}
	}
	if s.kind == kindRoot {
		w.ObjectMeta.DeepCopyInto(&w.Spec.Template.ObjectMeta)
		if spec, ok := u.Object["spec"].(map[string]any); ok {
			if err := conv.FromUnstructured(spec, &w.Spec.Template.Spec); err != nil {
				return nil, fmt.Errorf("%s: spec: %w", describeUnstructured(u), err)
			}
		}
		return w, nil
	}
	field, found, err := unstructured.NestedFieldNoCopy(u.Object, s.path...)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", describeUnstructured(u), s, err)
	}
	if !found || field == nil {
		return nil, fmt.Errorf("%s: %w at %s", describeUnstructured(u), ErrNoPodTemplate, s)
	}
	tmpl, ok := field.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %s is a %T, not an object", describeUnstructured(u), s, field)
	}
	if err := conv.FromUnstructured(tmpl, &w.Spec.Template); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", describeUnstructured(u), s, err)
	}
	return w, nil
}

// Apply writes w's labels, annotations and pod template into u, in place,
// leaving every other field of u as it is. Fields inside the template that
// corev1.PodTemplateSpec does not know are lost, so to change a live object
// send CreatePatch's operations instead. For the Pod shape, u's labels and
// annotations become those of w.ObjectMeta overlaid with those of
// w.Spec.Template (the template's win), and the template's spec is u's spec.
func (s Shape) Apply(w *WithPod, u *unstructured.Unstructured) error {
	if err := s.validate(); err != nil {
		return err
	}
	conv := runtime.DefaultUnstructuredConverter
	if s.kind == kindRoot {
		u.SetLabels(overlay(w.Labels, w.Spec.Template.Labels))
		u.SetAnnotations(overlay(w.Annotations, w.Spec.Template.Annotations))
		spec, err := conv.ToUnstructured(&w.Spec.Template.Spec)
		if err != nil {
			return fmt.Errorf("%s: spec: %w", describeUnstructured(u), err)
		}
		u.Object["spec"] = spec
		return nil
	}
	u.SetLabels(w.Labels)
	u.SetAnnotations(w.Annotations)
	tmpl, err := conv.ToUnstructured(&w.Spec.Template)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", describeUnstructured(u), s, err)
	}
	if err := unstructured.SetNestedField(u.Object, tmpl, s.Path()...); err != nil {
		return fmt.Errorf("%s: %s: %w", describeUnstructured(u), s, err)
	}
	return nil
}

func overlay(base, top map[string]string) map[string]string {
	if len(top) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(top))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range top {
		out[k] = v
	}
	return out
}

// describe names an object for errors: "apps/v1 Deployment default/web".
func describe(w *WithPod) string {
	return fmt.Sprintf("%s %s %s/%s", w.APIVersion, w.Kind, w.Namespace, w.Name)
}

func describeUnstructured(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
}
