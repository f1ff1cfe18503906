package psbinding

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// TestSubjectEventHandlerPassesStatusOnlyUpdatesToRolloutsOnly: a
// subject's update that changes nothing but its resourceVersion (its
// status, in the slim cache) reaches only the Bindings rolling out; every
// other event reaches every Binding tracking the subject, as
// SubjectEventHandler passes it.
func TestSubjectEventHandlerPassesStatusOnlyUpdatesToRolloutsOnly(t *testing.T) {
	subject := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "10", Generation: 2,
				Labels: map[string]string{"app": "web"}, Annotations: map[string]string{duck.BoundAnnotation: `{"x":1}`}},
		}
	}
	now := metav1.Now()
	tests := []struct {
		name   string
		change func(*metav1.PartialObjectMetadata)
		want   []string
	}{
		{"status only", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion = "11" }, []string{"rolling"}},
		{"resync", func(*metav1.PartialObjectMetadata) {}, []string{"idle", "rolling", "idle", "rolling"}},
		{"generation", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion, m.Generation = "11", 3 }, []string{"idle", "rolling", "idle", "rolling"}},
		{"records", func(m *metav1.PartialObjectMetadata) {
			m.ResourceVersion, m.Annotations = "11", map[string]string{duck.BoundAnnotation: `{"x":2}`}
		}, []string{"idle", "rolling", "idle", "rolling"}},
		{"labels", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion, m.Labels["tier"] = "11", "a" }, []string{"idle", "rolling", "idle", "rolling"}},
		{"relabelled out", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion, m.Labels = "11", nil }, []string{"idle", "rolling"}},
		{"deleting", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion, m.DeletionTimestamp = "11", &now }, []string{"idle", "rolling", "idle", "rolling"}},
		{"re-created", func(m *metav1.PartialObjectMetadata) { m.ResourceVersion, m.UID = "11", "u2" }, []string{"idle", "rolling", "idle", "rolling"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			notify := func(o tracker.Observer) { got = append(got, o.Name) }
			trk := tracker.New(notify, time.Hour)
			for _, name := range []string{"idle", "rolling"} {
				ref := tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns",
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
				o := tracker.Observer{GroupKind: schema.GroupKind{Group: "test.bindkit.dev", Kind: "EnvBinding"}, NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
				if err := trk.TrackReference(ref, o); err != nil {
					t.Fatal(err)
				}
			}
			h, err := NewSubjectEventHandler(SubjectEventOptions{Tracker: trk, Notify: notify,
				RollingOut: func(o tracker.Observer) bool { return o.Name == "rolling" },
				OnError:    func(err error) { t.Errorf("OnError: %v", err) }})
			if err != nil {
				t.Fatal(err)
			}
			old, updated := subject(), subject()
			tc.change(updated)
			h.OnUpdate(old, updated)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Bindings notified (-want +got):\n%s", diff)
			}
			got = nil
			h.OnAdd(subject(), true)
			h.OnDelete(subject())
			if diff := cmp.Diff([]string{"idle", "rolling", "idle", "rolling"}, got); diff != "" {
				t.Errorf("add and delete notified (-want +got):\n%s", diff)
			}
		})
	}
	_, err := NewSubjectEventHandler(SubjectEventOptions{})
	if err == nil || err.Error() != "psbinding: SubjectEventOptions needs Notify, RollingOut, Tracker" {
		t.Errorf("NewSubjectEventHandler with nothing set: %v", err)
	}
}

// TestRollingOut: a Binding is rolling out while a policy paces it and
// its rollout (the reconciler's last computed, else its status) is not
// complete at its generation.
func TestRollingOut(t *testing.T) {
	complete := &duck.RolloutStatus{Generation: 2, Updated: 3, Total: 3, Wave: 1}
	changing := &duck.RolloutStatus{Generation: 2, Updated: 2, Total: 3, Wave: 2,
		Changing: []duck.ChangingSubject{{Name: "c", Generation: 2}}}
	policy := map[string]string{RolloutMaxChangingAnnotation: "1"}
	now := metav1.Now()
	tests := []struct {
		name        string
		annotations map[string]string
		status      *duck.RolloutStatus
		mine        *duck.RolloutStatus // the reconciler's memory
		deleting    bool
		getErr      error
		want        bool
	}{
		{name: "no policy", status: changing, want: false},
		{name: "policy off", annotations: map[string]string{RolloutMaxChangingAnnotation: "off"}, status: changing, want: false},
		{name: "invalid policy", annotations: map[string]string{RolloutMaxChangingAnnotation: "many"}, want: false},
		{name: "complete", annotations: policy, status: complete, want: false},
		{name: "changing", annotations: policy, status: changing, want: true},
		{name: "never reconciled", annotations: policy, want: true},
		{name: "complete at an older generation", annotations: policy, status: &duck.RolloutStatus{Generation: 1, Updated: 3, Total: 3}, want: true},
		{name: "halted", annotations: policy, status: &duck.RolloutStatus{Generation: 2, Updated: 3, Total: 3, Halted: []string{"c"}}, want: true},
		{name: "memory newer than a complete status", annotations: policy, status: complete, mine: changing, want: true},
		{name: "memory complete, status behind", annotations: policy, status: changing, mine: complete, want: false},
		{name: "deleted, deletion not paced", annotations: policy, status: changing, deleting: true, want: false},
		{name: "deleted, deletion paced", annotations: map[string]string{RolloutMaxChangingAnnotation: "1", RolloutPaceDeletionAnnotation: "true"}, status: complete, deleting: true, want: true},
		{name: "gone", getErr: apierrors.NewNotFound(schema.GroupResource{}, "b"), want: false},
		{name: "unreadable", getErr: errors.New("cache broken"), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newEnvBinding("ns", "b", deploymentRef("ns", "", &metav1.LabelSelector{}), "A", "1")
			b.UID, b.Generation, b.Annotations = "uid", 2, tc.annotations
			b.Status.SetRollout(tc.status)
			if tc.deleting {
				b.DeletionTimestamp = &now
			}
			r := &BaseReconciler{Get: func(ns, name string) (Bindable, error) { return b, tc.getErr }}
			if tc.mine != nil {
				r.generations.setRollout(b, tc.mine)
			}
			if got := r.RollingOut(tracker.Observer{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}); got != tc.want {
				t.Errorf("RollingOut = %v, want %v", got, tc.want)
			}
		})
	}
	// A policy from Settings paces the Binding as its annotation does.
	b := newEnvBinding("ns", "b", deploymentRef("ns", "", &metav1.LabelSelector{}), "A", "1")
	b.Generation = 1
	r := &BaseReconciler{Settings: Settings{Rollout: &RolloutPolicy{MaxChanging: intstr.FromString("10%")}},
		Get: func(ns, name string) (Bindable, error) { return b, nil }}
	if !r.RollingOut(tracker.Observer{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}) {
		t.Error("a Binding paced by Settings.Rollout with no rollout yet: RollingOut = false, want true")
	}
}
