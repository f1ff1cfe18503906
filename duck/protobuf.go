package duck

import (
	"bytes"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// contentTypeProtobuf is the media type of the kube-apiserver's protobuf
// encoding of built-in kinds.
const contentTypeProtobuf = "application/vnd.kubernetes.protobuf"

// protobufMagic opens every protobuf response of the kube-apiserver: the
// envelope (runtime.Unknown) that names the kind of what it carries.
var protobufMagic = []byte("k8s\x00")

// protobufList reads LIST pages of one built-in kind from protobuf.
type protobufList struct {
	// listKind is the list's kind, as the envelope must name it.
	listKind string
	// decode decodes a page (the envelope's payload) into the items' typed
	// objects and the page's continue token. exact reports whether the
	// typed objects hold every field the page did, and nothing else: the
	// page's length is what the types write (see decodeProtobufPage).
	decode func(payload []byte) (items []runtime.Object, next string, exact bool, err error)
}

// protobufListOf returns how to read gvr's LIST pages from protobuf, for
// the built-in workload kinds a Binding's subjects most often are; false
// for any other resource, whose pages stay JSON.
func protobufListOf(gvr schema.GroupVersionResource) (protobufList, bool) {
	switch gvr {
	case appsv1.SchemeGroupVersion.WithResource("deployments"):
		return protobufList{"DeploymentList", typedPage(func(l *appsv1.DeploymentList) ([]appsv1.Deployment, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	case appsv1.SchemeGroupVersion.WithResource("statefulsets"):
		return protobufList{"StatefulSetList", typedPage(func(l *appsv1.StatefulSetList) ([]appsv1.StatefulSet, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	case appsv1.SchemeGroupVersion.WithResource("daemonsets"):
		return protobufList{"DaemonSetList", typedPage(func(l *appsv1.DaemonSetList) ([]appsv1.DaemonSet, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	case appsv1.SchemeGroupVersion.WithResource("replicasets"):
		return protobufList{"ReplicaSetList", typedPage(func(l *appsv1.ReplicaSetList) ([]appsv1.ReplicaSet, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	case batchv1.SchemeGroupVersion.WithResource("jobs"):
		return protobufList{"JobList", typedPage(func(l *batchv1.JobList) ([]batchv1.Job, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	case batchv1.SchemeGroupVersion.WithResource("cronjobs"):
		return protobufList{"CronJobList", typedPage(func(l *batchv1.CronJobList) ([]batchv1.CronJob, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	case corev1.SchemeGroupVersion.WithResource("pods"):
		return protobufList{"PodList", typedPage(func(l *corev1.PodList) ([]corev1.Pod, *metav1.ListMeta) { return l.Items, &l.ListMeta })}, true
	}
	return protobufList{}, false
}

// typedPage is the decode of a protobufList whose list type is L, with
// items of type T that parts returns.
func typedPage[L any, T any, PL interface {
	*L
	Unmarshal([]byte) error
	Size() int
}, PT interface {
	*T
	runtime.Object
}](parts func(PL) ([]T, *metav1.ListMeta)) func([]byte) ([]runtime.Object, string, bool, error) {
	return func(payload []byte) ([]runtime.Object, string, bool, error) {
		list := PL(new(L))
		if err := list.Unmarshal(payload); err != nil {
			return nil, "", false, err
		}
		items, meta := parts(list)
		objs := make([]runtime.Object, len(items))
		for i := range items {
			objs[i] = PT(&items[i])
		}
		return objs, meta.Continue, list.Size() == len(payload), nil
	}
}

// decodeProtobufPage reads a LIST response in the kube-apiserver's
// protobuf encoding (the envelope, then the list it carries) into a
// RawList whose items hold their typed objects (RawObject.Object), of the
// list's kind without the "List" suffix and its apiVersion.
//
// exact is false when the typed objects may not be the page's objects
// field for field: the page is longer than the types write (fields the
// server has and this build's types do not, which decoding drops) or
// shorter (fields the types have and the server does not, which the JSON
// the types write might carry). JSON patch tests compare the server's
// JSON with values the reconciler takes from the object it read, so a
// caller that guards patches reads such a page as JSON instead. Generated
// protobuf code writes every field it knows but the nil ones, the
// server's and this build's alike, so for the same fields the lengths
// agree.
func decodeProtobufPage(data []byte, pl protobufList, apiVersion string) (_ *RawList, exact bool, _ error) {
	payload, ok := bytes.CutPrefix(data, protobufMagic)
	if !ok {
		return nil, false, fmt.Errorf("decode %s: not the kube-apiserver's protobuf encoding: %.20q", pl.listKind, data)
	}
	var envelope runtime.Unknown
	if err := envelope.Unmarshal(payload); err != nil {
		return nil, false, fmt.Errorf("decode %s: envelope: %w", pl.listKind, err)
	}
	if envelope.Kind != pl.listKind || envelope.APIVersion != apiVersion {
		return nil, false, fmt.Errorf("decode %s: the response is a %s %s", pl.listKind, envelope.APIVersion, envelope.Kind)
	}
	if envelope.ContentEncoding != "" {
		return nil, false, fmt.Errorf("decode %s: content encoding %q", pl.listKind, envelope.ContentEncoding)
	}
	items, next, exact, err := pl.decode(envelope.Raw)
	if err != nil {
		return nil, false, fmt.Errorf("decode %s: %w", pl.listKind, err)
	}
	kind := pl.listKind[:len(pl.listKind)-len("List")]
	list := &RawList{APIVersion: apiVersion, Kind: kind, Continue: next, Items: make([]RawObject, len(items))}
	for i, obj := range items {
		accessor, ok := obj.(metav1.Object)
		if !ok || accessor.GetName() == "" {
			return nil, false, fmt.Errorf("decode %s: item %d has no metadata.name", pl.listKind, i)
		}
		list.Items[i] = RawObject{Name: accessor.GetName(), Object: obj}
	}
	return list, exact, nil
}

// Bytes returns the item's JSON: as the kube-apiserver sent it, or, for
// an item that came as protobuf, as its typed object writes it (the same
// JSON the kube-apiserver writes for it, when the page was read exactly;
// see ListRaw). The item's apiVersion and kind are not added: a
// kube-apiserver's JSON list of a built-in kind leaves them out too.
func (o RawObject) Bytes() ([]byte, error) {
	if o.Object == nil {
		return o.JSON, nil
	}
	raw, err := json.Marshal(o.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", o.Name, err)
	}
	return raw, nil
}

// FromObject is Decode for a workload held as its typed object (an item a
// LIST page brought as protobuf): a Deployment, ReplicaSet, StatefulSet,
// DaemonSet or Job with the PodSpecable shape, a Pod with the Pod shape,
// a CronJob with the CronJob shape is read without any decoding (the
// WithPod shares the object's memory: treat both as read-only;
// managedFields are left out, as Decode leaves them). Any other
// object, or shape, is written as JSON and decoded (Decode), so both say
// the same of it.
func (s Shape) FromObject(obj runtime.Object) (*WithPod, error) {
	if w := s.fromTyped(obj); w != nil {
		return w, nil
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("decode %s workload: encode %T: %w", s, obj, err)
	}
	return s.Decode(raw)
}

// fromTyped is FromObject's reading without decoding, or nil when s is not
// where obj's type keeps its template.
func (s Shape) fromTyped(obj runtime.Object) *WithPod {
	var (
		meta     metav1.ObjectMeta
		typeMeta metav1.TypeMeta
		template *corev1.PodTemplateSpec
		at       = PodSpecable() // where obj's type keeps its template
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, typeMeta, template = o.ObjectMeta, o.TypeMeta, &o.Spec.Template
	case *appsv1.StatefulSet:
		meta, typeMeta, template = o.ObjectMeta, o.TypeMeta, &o.Spec.Template
	case *appsv1.DaemonSet:
		meta, typeMeta, template = o.ObjectMeta, o.TypeMeta, &o.Spec.Template
	case *appsv1.ReplicaSet:
		meta, typeMeta, template = o.ObjectMeta, o.TypeMeta, &o.Spec.Template
	case *batchv1.Job:
		meta, typeMeta, template = o.ObjectMeta, o.TypeMeta, &o.Spec.Template
	case *batchv1.CronJob:
		meta, typeMeta, template, at = o.ObjectMeta, o.TypeMeta, &o.Spec.JobTemplate.Spec.Template, CronJob()
	case *corev1.Pod:
		// As Decode: the template is the Pod's metadata, copied, and its spec.
		meta, typeMeta, at = o.ObjectMeta, o.TypeMeta, Pod()
		template = &corev1.PodTemplateSpec{Spec: o.Spec}
	default:
		return nil
	}
	if s.kind != at.kind || s.pointer != at.pointer {
		return nil
	}
	meta.ManagedFields = nil // as Decode, which skips them
	w := &WithPod{TypeMeta: typeMeta, ObjectMeta: meta, Spec: WithPodSpec{Template: *template}}
	if s.kind == kindRoot {
		meta.DeepCopyInto(&w.Spec.Template.ObjectMeta)
	}
	return w
}
