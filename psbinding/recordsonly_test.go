package psbinding

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
)

// TestKindOfChange: what a work does to a subject, by the binding step's
// operations without records and the subject's record of the Binding (at
// generation 5).
func TestKindOfChange(t *testing.T) {
	bind, unbind := work{name: "web", bind: true}, work{name: "web"}
	undoing := work{name: "web", bind: true, undo: &envBinding{}}
	for _, tc := range []struct {
		name        string
		templateOps int
		w           work
		recorded    bool
		gen         int64
		want        changeKind
	}{
		{"the template changes", 2, bind, true, 4, templateChange},
		{"an earlier generation's change is this one's", 0, bind, true, 4, carried},
		{"no record yet, the change there already", 0, bind, false, 0, recordsOnly},
		{"recorded at generation 0 (another Binding's Undo)", 0, bind, true, 0, recordsOnly},
		{"recorded ahead of the Binding", 0, bind, true, 6, recordsOnly},
		{"an unbinding that changes no template", 0, unbind, true, 4, recordsOnly},
		{"an unbinding that does", 1, unbind, true, 4, templateChange},
		{"an undo's binding", 0, undoing, true, 4, recordsOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kindOfChange(tc.templateOps, tc.w, tc.recorded, tc.gen, 5); got != tc.want {
				t.Errorf("kindOfChange = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecordsOnlyEditIsNotPaced: a paced Binding edited to generation 5
// with the same change. Subjects that record generation 4 and carry it
// are not written and count as updated; one that carries the change with
// no record gets its record at once, outside any wave; only the subject
// whose template changes is paced; an excluded subject counts nowhere.
// Paused, the plan says so (TemplateChanges, RecordsOnly) and writes
// nothing. Without a policy, the carried subjects are not written either.
func TestRecordsOnlyEditIsNotPaced(t *testing.T) {
	token := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		// wantPatched are the subjects patched, wantEnv those that carry
		// the change afterwards.
		wantPatched []string
		wantPlan    *duck.PlanStatus
		wantRollout *duck.RolloutStatus
	}{{
		name:        "paced",
		annotations: map[string]string{RolloutMaxChangingAnnotation: "1"},
		// The template change waits for edits to settle (a new process
		// does not know the last edit was quiet); the records are written
		// now.
		wantPatched: []string{"no-record"},
		wantRollout: &duck.RolloutStatus{Generation: 5, Updated: 3, Total: 4},
	}, {
		name:        "paused: the plan",
		annotations: map[string]string{RolloutMaxChangingAnnotation: "1", RolloutPausedAnnotation: "true"},
		wantPlan: &duck.PlanStatus{Generation: 5, Total: 4, Unchanged: 2, Bind: 2, TemplateChanges: 1, RecordsOnly: 1,
			Waves: []duck.PlanWave{{Number: 1, Count: 1, Subjects: []string{"no-env"}}}},
	}, {
		name:        "no policy",
		wantPatched: []string{"no-env", "no-record"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newEnvBinding("ns", "gh", deploymentRef("ns", "", matchLabels("app", "web")), "TOKEN", "t")
			b.UID, b.Generation, b.Annotations = "uid-gh", 5, tc.annotations
			b.Finalizers = []string{"test.bindkit.dev/envbindings"}
			web := map[string]string{"app": "web"}
			at4 := func(name string) *appsv1.Deployment {
				d := testDeployment("ns", name, web, token)
				d.Annotations = map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/gh@uid-gh:4"}
				return d
			}
			excluded := testDeployment("ns", "excluded", map[string]string{"app": "web", ExcludeLabel: "true"})
			f := newReconcilerFixture(t, b, at4("carried-1"), at4("carried-2"),
				testDeployment("ns", "no-record", web, token), testDeployment("ns", "no-env", web), excluded)
			err := f.r.Reconcile(context.Background(), "ns/gh")
			if _, requeue := controller.IsRequeueAfter(err); err != nil && !requeue {
				t.Fatalf("Reconcile: %v", err)
			}
			var patched []string
			for _, a := range f.client.Actions() {
				if a.GetVerb() == "patch" && a.GetResource() == deploymentsGVR {
					patched = append(patched, a.(interface{ GetName() string }).GetName())
				}
			}
			slices.Sort(patched)
			if diff := cmp.Diff(tc.wantPatched, patched); diff != "" {
				t.Errorf("subjects patched (-want +got):\n%s", diff)
			}
			for _, name := range []string{"carried-1", "carried-2"} {
				if got := f.deploymentBound(t, "ns", name); got != "envbindings.test.bindkit.dev/gh@uid-gh:4" {
					t.Errorf("%s's record = %q, want generation 4's, left as it was", name, got)
				}
			}
			got := f.binding(t, "ns", "gh")
			if tc.wantRollout != nil {
				ro := got.Status.Rollout.DeepCopy()
				ro.Changing, ro.Waiting = nil, nil
				if diff := cmp.Diff(tc.wantRollout, ro); diff != "" {
					t.Errorf("rollout (-want +got):\n%s", diff)
				}
			}
			if tc.wantPlan != nil {
				if diff := cmp.Diff(tc.wantPlan, got.Status.Plan, cmpopts.IgnoreFields(duck.PlanStatus{}, "Changes")); diff != "" {
					t.Errorf("plan (-want +got):\n%s", diff)
				}
			}
		})
	}
}
