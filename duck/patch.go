package duck

import (
	"reflect"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CreatePatch returns the JSON patch that turns a PodSpecable workload from
// before into after; it is PodSpecable().CreatePatch(before, after).
func CreatePatch(before, after *WithPod) ([]jsonpatch.JsonPatchOperation, error) {
	return PodSpecable().CreatePatch(before, after)
}

// CreatePatch returns the JSON patch (RFC 6902) that turns the workload
// before was decoded from into one whose duck fields equal after's, with
// paths under the shape's template path. It compares, in this order:
//
//   - the labels and annotations of the object's metadata,
//   - the labels and annotations of the template's metadata,
//   - the template's spec, field by field.
//
// Nothing else is compared, so no operation ever names a field WithPod does
// not know and the real object's other fields survive the patch. Inserting
// or removing list elements (env vars, volumes, mounts) gives one operation
// per element; map keys come in sorted order, so equal inputs give equal
// patches. When nothing changed the result is empty (nil).
//
// Operation values share memory with after: marshal the patch before
// changing after again. Under the Pod shape, the object's metadata and the
// template's metadata are the same JSON: changes made to either land in
// /metadata, the template's winning where both changed one key.
func (s Shape) CreatePatch(before, after *WithPod) ([]jsonpatch.JsonPatchOperation, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if before == nil || after == nil {
		return nil, errNilWithPod
	}
	var ops []jsonpatch.Operation
	bt, at := &before.Spec.Template, &after.Spec.Template
	if s.kind == kindRoot {
		labels := mergeDelta(after.Labels, bt.Labels, at.Labels)
		annotations := mergeDelta(after.Annotations, bt.Annotations, at.Annotations)
		ops = diffObjectMeta(ops, &before.ObjectMeta, labels, annotations)
		return diffPodSpec(ops, "", &bt.Spec, &at.Spec), nil
	}
	ops = diffObjectMeta(ops, &before.ObjectMeta, after.Labels, after.Annotations)

	prefix := s.templatePointer()
	if isZeroTemplate(bt) {
		// The template may be absent from the object, and with it every
		// parent a finer operation would need.
		if !isZeroTemplate(at) {
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: prefix, Value: at})
		}
		return ops, nil
	}
	ops = diffTemplateMeta(ops, prefix, &bt.ObjectMeta, &at.ObjectMeta)
	return diffPodSpec(ops, prefix, &bt.Spec, &at.Spec), nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errNilWithPod = constError("duck: CreatePatch needs two non-nil WithPods")

func isZeroTemplate(t *corev1.PodTemplateSpec) bool {
	return reflect.ValueOf(t).Elem().IsZero()
}

// diffObjectMeta diffs the object's labels and annotations. An object whose
// metadata decoded to nothing may have no metadata member, or a null one,
// so changes then come as one "add" of the metadata object.
func diffObjectMeta(ops []jsonpatch.Operation, before *metav1.ObjectMeta, labels, annotations map[string]string) []jsonpatch.Operation {
	if reflect.ValueOf(before).Elem().IsZero() {
		return addMeta(ops, "/metadata", labels, annotations)
	}
	ops = diffStringMap(ops, "", "/metadata/labels", before.Labels, labels)
	return diffStringMap(ops, "", "/metadata/annotations", before.Annotations, annotations)
}

// addMeta appends the "add" of a metadata object holding labels and
// annotations at path, unless both are empty.
func addMeta(ops []jsonpatch.Operation, path string, labels, annotations map[string]string) []jsonpatch.Operation {
	if len(labels) == 0 && len(annotations) == 0 {
		return ops
	}
	value := map[string]map[string]string{}
	if len(labels) > 0 {
		value["labels"] = labels
	}
	if len(annotations) > 0 {
		value["annotations"] = annotations
	}
	return append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: value})
}

// diffTemplateMeta diffs the labels and annotations of the template at
// prefix. A template
// whose metadata is all zero may have no metadata member at all, so new
// labels or annotations then come as one "add" of the metadata object.
func diffTemplateMeta(ops []jsonpatch.Operation, prefix string, before, after *metav1.ObjectMeta) []jsonpatch.Operation {
	if reflect.ValueOf(before).Elem().IsZero() {
		return addMeta(ops, prefix+"/metadata", after.Labels, after.Annotations)
	}
	ops = diffStringMap(ops, prefix, "/metadata/labels", before.Labels, after.Labels)
	return diffStringMap(ops, prefix, "/metadata/annotations", before.Annotations, after.Annotations)
}

// diffPodSpec appends the operations for the pod spec at prefix+"/spec".
func diffPodSpec(ops []jsonpatch.Operation, prefix string, before, after *corev1.PodSpec) []jsonpatch.Operation {
	p := patcher{table: podSpecTable(), base: prefix, ops: ops}
	p.push("spec")
	p.diffMember(reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem(), true)
	return p.ops
}

// mergeDelta applies to object the changes from tBefore to tAfter: keys
// added or changed in the template are set, keys removed from it deleted.
// object is returned as is when the template did not change.
func mergeDelta(object, tBefore, tAfter map[string]string) map[string]string {
	if mapsEqual(tBefore, tAfter) {
		return object
	}
	out := make(map[string]string, len(object)+len(tAfter))
	for k, v := range object {
		out[k] = v
	}
	for k := range tBefore {
		if _, ok := tAfter[k]; !ok {
			delete(out, k)
		}
	}
	for k, v := range tAfter {
		if tBefore[k] != v || !hasKey(tBefore, k) {
			out[k] = v
		}
	}
	return out
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
