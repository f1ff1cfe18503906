package injection_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/injection/injectiontest"
)

// Widget is the Go type of the test CRD in testdata/widgets.yaml: a custom
// resource with no generated clientset, informer or lister.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

type WidgetSpec struct {
	Size  int64  `json:"size,omitempty"`
	Color string `json:"color,omitempty"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

var (
	widgetsGVR = schema.GroupVersionResource{Group: "example.bindkit.dev", Version: "v1alpha1", Resource: "widgets"}
	widgetKind = schema.GroupVersionKind{Group: "example.bindkit.dev", Version: "v1alpha1", Kind: "Widget"}

	widgetResource = injectiontest.Resource{Kind: widgetKind, Resource: "widgets", Namespaced: true}
)

// widget is an unstructured Widget; size is any so a test can store a
// value that does not convert.
func widget(namespace, name string, size any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"size": size},
	}}
	u.SetGroupVersionKind(widgetKind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// sizes maps namespace/name to spec.size, the state tests compare.
func sizes(ws []*Widget) map[string]int64 {
	out := map[string]int64{}
	for _, w := range ws {
		out[w.Namespace+"/"+w.Name] = w.Spec.Size
	}
	return out
}
