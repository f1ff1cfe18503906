package duck_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

func TestWithPodDeepCopy(t *testing.T) {
	orig, err := duck.PodSpecable().Decode(mustJSON(t, realisticDeployment()))
	if err != nil {
		t.Fatal(err)
	}
	want := toMap(t, orig)
	tests := []struct {
		name   string
		copy   func(*duck.WithPod) *duck.WithPod
		mutate func(*duck.WithPod)
	}{
		{"DeepCopy labels", (*duck.WithPod).DeepCopy, func(w *duck.WithPod) { w.Labels["x"] = "y" }},
		{"DeepCopy template env", (*duck.WithPod).DeepCopy, func(w *duck.WithPod) { w.Spec.Template.Spec.Containers[0].Env[0].Value = "z" }},
		{"DeepCopy template annotations", (*duck.WithPod).DeepCopy, func(w *duck.WithPod) { w.Spec.Template.Annotations["x"] = "y" }},
		{"DeepCopyObject volumes", func(w *duck.WithPod) *duck.WithPod { return w.DeepCopyObject().(*duck.WithPod) },
			func(w *duck.WithPod) { w.Spec.Template.Spec.Volumes[0].ConfigMap.Name = "other" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.copy(orig)
			if diff := cmp.Diff(want, toMap(t, c)); diff != "" {
				t.Fatalf("copy differs from original (-orig +copy):\n%s", diff)
			}
			tt.mutate(c)
			if diff := cmp.Diff(want, toMap(t, orig)); diff != "" {
				t.Errorf("changing the copy changed the original (-before +after):\n%s", diff)
			}
		})
	}
	if (*duck.WithPod)(nil).DeepCopy() != nil {
		t.Error("nil DeepCopy is not nil")
	}
}

func TestWithPodListDeepCopy(t *testing.T) {
	list := &duck.WithPodList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []duck.WithPod{{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}}}}}
	c := list.DeepCopyObject().(*duck.WithPodList)
	c.Items[0].Labels["k"] = "changed"
	c.ResourceVersion = "8"
	if list.Items[0].Labels["k"] != "v" || list.ResourceVersion != "7" {
		t.Errorf("changing the copy changed the original: %+v", list)
	}
}
