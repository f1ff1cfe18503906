package psbinding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestBindingEventHandlerIgnoresStatusOnlyUpdates(t *testing.T) {
	base := func() *envBinding {
		b := newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t")
		b.Generation, b.ResourceVersion = 2, "10"
		return b
	}
	now := metav1.Now()
	tests := []struct {
		name   string
		change func(*envBinding)
		want   bool
	}{
		{"status only", func(b *envBinding) {
			b.ResourceVersion = "11"
			b.Status.MarkBindingUnavailable("SubjectPatchFailed", "web: webhook unavailable")
		}, false},
		{"spec (generation)", func(b *envBinding) { b.Generation = 3 }, true},
		{"deletion", func(b *envBinding) { b.DeletionTimestamp = &now }, true},
		{"finalizers", func(b *envBinding) { b.Finalizers = []string{"x/y"} }, true},
		{"annotations", func(b *envBinding) { b.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"} }, true},
		{"labels", func(b *envBinding) { b.Labels = map[string]string{"team": "a"} }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			h := BindingEventHandler(func(obj any) { got = append(got, obj.(*envBinding).Name) })
			old, updated := base(), base()
			tc.change(updated)
			h.OnUpdate(old, updated)
			if (len(got) == 1) != tc.want {
				t.Errorf("enqueued %v, want enqueue %v", got, tc.want)
			}
		})
	}
	var got []string
	h := BindingEventHandler(func(obj any) { got = append(got, obj.(*envBinding).Name) })
	h.OnAdd(base(), false)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/gh", Obj: base()})
	if diff := cmp.Diff([]string{"gh", "gh"}, got); diff != "" {
		t.Errorf("add and tombstoned delete (-want +got):\n%s", diff)
	}
}
