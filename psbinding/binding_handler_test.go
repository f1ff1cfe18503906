package psbinding

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
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
		// wantIndex is whether IndexEventHandler passes the update on.
		wantIndex bool
	}{
		{"status only", func(b *envBinding) {
			b.ResourceVersion = "11"
			b.Status.MarkBindingUnavailable("SubjectPatchFailed", "web: webhook unavailable")
		}, false, false},
		{"spec (generation)", func(b *envBinding) { b.Generation = 3 }, true, true},
		{"deletion", func(b *envBinding) { b.DeletionTimestamp = &now }, true, true},
		{"finalizers", func(b *envBinding) { b.Finalizers = []string{"x/y"} }, true, false},
		{"annotations", func(b *envBinding) { b.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"} }, true, true},
		{"labels", func(b *envBinding) { b.Labels = map[string]string{"team": "a"} }, true, true},
		// Admission reads whether the rollout of the generation is
		// complete: a wave's progress is not passed on, its completion
		// and a later halt are.
		{"rollout progress", func(b *envBinding) {
			b.ResourceVersion = "11"
			b.Status.Rollout = &duck.RolloutStatus{Generation: 2, Updated: 3, Total: 5, Wave: 2}
		}, false, false},
		{"rollout completed", func(b *envBinding) {
			b.ResourceVersion = "11"
			b.Status.Rollout = &duck.RolloutStatus{Generation: 2, Updated: 5, Total: 5, Wave: 3}
		}, false, true},
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
			var passed int
			IndexEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { passed++ }}).OnUpdate(old, updated)
			if (passed == 1) != tc.wantIndex {
				t.Errorf("IndexEventHandler passed on %d updates, want passed on %v", passed, tc.wantIndex)
			}
		})
	}
	// A halt of a generation whose rollout was complete is passed on.
	complete, halted := base(), base()
	complete.Status.Rollout = &duck.RolloutStatus{Generation: 2, Updated: 5, Total: 5, Wave: 3}
	halted.ResourceVersion = "12"
	halted.Status.Rollout = &duck.RolloutStatus{Generation: 2, Updated: 4, Total: 6, Wave: 4, Halted: []string{"new"}}
	var passed int
	IndexEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { passed++ }}).OnUpdate(complete, halted)
	if passed != 1 {
		t.Errorf("IndexEventHandler passed on %d updates of a complete rollout halted, want 1", passed)
	}
	var index []string
	ih := IndexEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { index = append(index, "add "+obj.(*envBinding).Name) },
		DeleteFunc: func(obj any) { index = append(index, "delete "+obj.(cache.DeletedFinalStateUnknown).Key) },
	})
	ih.OnAdd(base(), false)
	ih.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/gh", Obj: base()})
	if diff := cmp.Diff([]string{"add gh", "delete ns/gh"}, index); diff != "" {
		t.Errorf("IndexEventHandler's add and delete (-want +got):\n%s", diff)
	}
	var got []string
	h := BindingEventHandler(func(obj any) { got = append(got, obj.(*envBinding).Name) })
	h.OnAdd(base(), false)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/gh", Obj: base()})
	if diff := cmp.Diff([]string{"gh", "gh"}, got); diff != "" {
		t.Errorf("add and tombstoned delete (-want +got):\n%s", diff)
	}
}
