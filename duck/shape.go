package duck

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/internal/jsonscan"
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

// ErrNoPodTemplate is wrapped by the error of Decode and FromUnstructured
// for a workload that has no pod template where its Shape looks (the field
// is absent or null). Such a workload must not be patched: a template
// added where the object's schema keeps none is pruned or rejected by the
// API server, so binding it never settles. Its message names the object and
// the path, e.g. "example.com/v1 Widget ns/x: no pod template at
// spec.template". A template, or a field on the way to it, that holds
// something else than an object counts as no template too; its message says
// what it holds.
var ErrNoPodTemplate = errors.New("no pod template")

// Decode reads a workload's JSON, e.g. the object of an AdmissionReview,
// into a new WithPod, as the kube-apiserver decodes it: field names match
// case-sensitively (a "SPEC" key is not spec) and a field WithPod knows
// may appear only once. managedFields are skipped, as the informers drop
// them. It is DecodeChecked with MaxDepth and no check.
//
// When the workload has no template where the shape looks, the error wraps
// ErrNoPodTemplate and the WithPod returned with it holds the workload's
// metadata and a zero template (as when the template, or a field on the
// way to it, is not an object); every other error comes with a nil
// WithPod.
func (s Shape) Decode(raw []byte) (*WithPod, error) {
	return s.DecodeChecked(raw, MaxDepth, nil)
}

// DecodeChecked is Decode in two steps: it scans raw (see Scan, with
// maxDepth), passes the ObjectStats to check, and decodes only when check
// returns nil. check's error is returned as is. It lets a caller refuse,
// or budget for, a costly object before any of it is decoded.
func (s Shape) DecodeChecked(raw []byte, maxDepth int, check func(ObjectStats) error) (*WithPod, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	res, err := s.scan(raw, maxDepth)
	if notObject, ok := errors.AsType[*jsonscan.NotObjectError](err); ok {
		// The path to the template holds something else than an object:
		// there is no pod template to bind, as when it is absent.
		w := &WithPod{}
		var top topJSON
		if kjson.UnmarshalCaseSensitivePreserveInts(raw, &top) == nil {
			w.TypeMeta, w.ObjectMeta = top.TypeMeta, top.Metadata.ObjectMeta
		}
		return w, fmt.Errorf("%s: %w at %s: %v", describe(w), ErrNoPodTemplate, s, notObject)
	}
	if err != nil {
		return nil, fmt.Errorf("decode %s workload: %w", s, err)
	}
	if check != nil {
		if err := check(res.stats); err != nil {
			return nil, err
		}
	}
	w := &WithPod{}
	switch s.kind {
	case kindSpecTemplate:
		var wp withPodJSON
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &wp); err != nil {
			return nil, fmt.Errorf("decode %s workload: %w", s, err)
		}
		w.TypeMeta, w.ObjectMeta, w.Spec = wp.TypeMeta, wp.Metadata.ObjectMeta, wp.Spec
	case kindRoot:
		var pod podJSON
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &pod); err != nil {
			return nil, fmt.Errorf("decode pod: %w", err)
		}
		w.TypeMeta, w.ObjectMeta = pod.TypeMeta, pod.Metadata.ObjectMeta
		w.ObjectMeta.DeepCopyInto(&w.Spec.Template.ObjectMeta)
		w.Spec.Template.Spec = pod.Spec
		return w, nil
	default:
		var top topJSON
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &top); err != nil {
			return nil, fmt.Errorf("decode %s workload: %w", s, err)
		}
		w.TypeMeta, w.ObjectMeta = top.TypeMeta, top.Metadata.ObjectMeta
		if res.template != nil {
			if err := kjson.UnmarshalCaseSensitivePreserveInts(res.template, &w.Spec.Template); err != nil {
				return nil, fmt.Errorf("%s: decode %s: %w", describe(w), s, err)
			}
		}
	}
	if res.template == nil {
		return w, fmt.Errorf("%s: %w at %s", describe(w), ErrNoPodTemplate, s)
	}
	return w, nil
}

// FromUnstructured converts a workload, e.g. from the dynamic client, into a
// new WithPod that shares no memory with u. Like Decode, it reports a
// missing or null template, or one that is not an object, with an error
// wrapping ErrNoPodTemplate, and then returns the workload's metadata with
// a zero template.
func (s Shape) FromUnstructured(u *unstructured.Unstructured) (*WithPod, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	w := &WithPod{}
	conv := runtime.DefaultUnstructuredConverter
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
	path := s.Path()
	field, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil {
		// A field on the way to the template is not an object.
		return w, fmt.Errorf("%s: %w at %s: %v", describeUnstructured(u), ErrNoPodTemplate, s, err)
	}
	if !found || field == nil {
		return w, fmt.Errorf("%s: %w at %s", describeUnstructured(u), ErrNoPodTemplate, s)
	}
	tmpl, ok := field.(map[string]any)
	if !ok {
		return w, fmt.Errorf("%s: %w at %s: it is a %T, not an object", describeUnstructured(u), ErrNoPodTemplate, s, field)
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
