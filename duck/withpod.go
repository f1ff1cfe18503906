package duck

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// WithPod is the PodSpecable duck type: any object with metadata and a pod
// template. Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and any
// custom resource with spec.template decode into it directly; a Shape maps
// other workloads (bare Pods, CronJobs, custom paths) onto it. Fields of the
// real object that WithPod does not declare are ignored on decode and are
// never touched by the patches this package builds.
type WithPod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WithPodSpec `json:"spec,omitempty"`
}

// WithPodSpec is the part of a workload's spec that WithPod knows: the pod
// template.
type WithPodSpec struct {
	Template corev1.PodTemplateSpec `json:"template,omitempty"`
}

// WithPodList is a list of WithPod, the list type of the informers that
// TypedInformerFactory builds.
type WithPodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []WithPod `json:"items"`
}

var (
	_ runtime.Object = (*WithPod)(nil)
	_ metav1.Object  = (*WithPod)(nil)
	_ runtime.Object = (*WithPodList)(nil)
)

// DeepCopyInto copies w into out; out shares no memory with w.
func (w *WithPod) DeepCopyInto(out *WithPod) {
	*out = *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	w.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a copy of w that shares no memory with it, or nil for nil.
func (w *WithPod) DeepCopy() *WithPod {
	if w == nil {
		return nil
	}
	out := new(WithPod)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (w *WithPod) DeepCopyObject() runtime.Object {
	if c := w.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies s into out; out shares no memory with s.
func (s *WithPodSpec) DeepCopyInto(out *WithPodSpec) {
	*out = *s
	s.Template.DeepCopyInto(&out.Template)
}

// DeepCopy returns a copy of s that shares no memory with it, or nil for nil.
func (s *WithPodSpec) DeepCopy() *WithPodSpec {
	if s == nil {
		return nil
	}
	out := new(WithPodSpec)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies l into out; out shares no memory with l.
func (l *WithPodList) DeepCopyInto(out *WithPodList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]WithPod, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l that shares no memory with it, or nil for nil.
func (l *WithPodList) DeepCopy() *WithPodList {
	if l == nil {
		return nil
	}
	out := new(WithPodList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *WithPodList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}
