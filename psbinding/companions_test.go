package psbinding

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
)

// TestReconcileAppliesCompanions reconciles Binding a of Deployment web,
// which Binding b selects too: b's change goes in a's patch, recorded,
// unless a rollout paces either, b is being deleted, or web records or is
// held from b; when it went, b's own reconcile then patches nothing (-1:
// not checked).
func TestReconcileAppliesCompanions(t *testing.T) {
	paced := map[string]string{RolloutMaxChangingAnnotation: "1"}
	paused := map[string]string{RolloutPausedAnnotation: "true"}
	deleting := metav1.Now()
	for _, tc := range []struct {
		name              string
		aAnnotations      map[string]string
		bAnnotations      map[string]string
		bDeleting         bool
		webAnnotations    map[string]string
		wantEnv           []corev1.EnvVar
		wantBound         string
		wantWebPatchesByB int
	}{{
		name:              "b goes in a's patch",
		wantEnv:           []corev1.EnvVar{{Name: "B", Value: "b"}, {Name: "A", Value: "a"}},
		wantBound:         "envbindings.test.bindkit.dev/a@uid-a:1,envbindings.test.bindkit.dev/b@uid-b:5",
		wantWebPatchesByB: 0,
	}, {
		name:              "b paced by a policy",
		bAnnotations:      paced,
		wantEnv:           []corev1.EnvVar{{Name: "A", Value: "a"}},
		wantBound:         "envbindings.test.bindkit.dev/a@uid-a:1",
		wantWebPatchesByB: -1, // its wave waits for its edits to settle
	}, {
		name:              "b paused",
		bAnnotations:      paused,
		wantEnv:           []corev1.EnvVar{{Name: "A", Value: "a"}},
		wantBound:         "envbindings.test.bindkit.dev/a@uid-a:1",
		wantWebPatchesByB: 0, // paused before its first wave: b's reconcile patches nothing either
	}, {
		name:              "a paced by a policy: its wave carries its own change only",
		aAnnotations:      paced,
		wantEnv:           []corev1.EnvVar{{Name: "A", Value: "a"}},
		wantWebPatchesByB: 1,
	}, {
		name:              "b being deleted",
		bDeleting:         true,
		wantEnv:           []corev1.EnvVar{{Name: "A", Value: "a"}},
		wantBound:         "envbindings.test.bindkit.dev/a@uid-a:1",
		wantWebPatchesByB: 0,
	}, {
		name:              "web records b at another generation: b's reconcile takes it",
		webAnnotations:    map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/b@uid-b:4"},
		wantEnv:           []corev1.EnvVar{{Name: "A", Value: "a"}},
		wantBound:         "envbindings.test.bindkit.dev/a@uid-a:1,envbindings.test.bindkit.dev/b@uid-b:4",
		wantWebPatchesByB: 1,
	}, {
		name:              "web held from b",
		webAnnotations:    map[string]string{duck.HeldAnnotation: "envbindings.test.bindkit.dev/b@uid-b:5"},
		wantEnv:           []corev1.EnvVar{{Name: "A", Value: "a"}},
		wantBound:         "envbindings.test.bindkit.dev/a@uid-a:1",
		wantWebPatchesByB: 1, // with no policy, b's reconcile lifts the hold and binds
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newEnvBinding("ns", "a", deploymentRef("", "web", nil), "A", "a")
			a.UID, a.Generation, a.Annotations = "uid-a", 1, tc.aAnnotations
			b := newEnvBinding("ns", "b", deploymentRef("", "web", nil), "B", "b")
			b.UID, b.Generation, b.Annotations = "uid-b", 5, tc.bAnnotations
			if tc.bDeleting {
				b.DeletionTimestamp, b.Finalizers = &deleting, []string{"test.bindkit.dev/envbindings"}
			}
			web := testDeployment("ns", "web", nil)
			web.Annotations = tc.webAnnotations
			f := newReconcilerFixture(t, a, b, web)
			var asked []string
			f.r.Companions = func(group, kind, namespace, name string, _ map[string]string) []Bindable {
				asked = append(asked, group+"/"+kind+" "+namespace+"/"+name)
				return []Bindable{f.binding(t, "ns", "a"), f.binding(t, "ns", "b")}
			}
			ctx := context.Background()
			if err := f.r.Reconcile(ctx, "ns/a"); err != nil {
				if _, requeue := controller.IsRequeueAfter(err); !requeue {
					t.Fatalf("Reconcile a: %v", err)
				}
			}
			if diff := cmp.Diff(tc.wantEnv, f.deploymentEnv(t, "ns", "web")); diff != "" {
				t.Errorf("web's env after a's reconcile (-want +got):\n%s", diff)
			}
			if tc.wantBound != "" {
				if diff := cmp.Diff(tc.wantBound, f.deploymentBound(t, "ns", "web")); diff != "" {
					t.Errorf("web's record after a's reconcile (-want +got):\n%s", diff)
				}
			}
			if tc.aAnnotations == nil && !slices.Contains(asked, "apps/Deployment ns/web") {
				t.Errorf("a's reconcile asked for the companions of %q, want apps/Deployment ns/web", asked)
			}
			f.client.ClearActions()
			if tc.wantWebPatchesByB < 0 {
				return
			}
			if err := f.r.Reconcile(ctx, "ns/b"); err != nil {
				t.Fatalf("Reconcile b: %v", err)
			}
			if got := webPatches(f); got != tc.wantWebPatchesByB {
				t.Errorf("b's reconcile patched web %d times, want %d", got, tc.wantWebPatchesByB)
			}
		})
	}
}

// webPatches counts the patches of Deployment web the fixture's clients
// sent since the last ClearActions.
func webPatches(f *reconcilerFixture) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource() == deploymentsGVR {
			n++
		}
	}
	return n
}

// TestPanickingCompanionLeavesThePatchToItsBinding: a companion whose Do
// panics is left out of the patch; the Binding reconciled binds as
// without it, and the panic is not its failure.
func TestPanickingCompanionLeavesThePatchToItsBinding(t *testing.T) {
	a := newEnvBinding("ns", "a", deploymentRef("", "web", nil), "A", "a")
	a.UID, a.Generation = "uid-a", 1
	f := newReconcilerFixture(t, a, testDeployment("ns", "web", nil))
	b := &misbehaving{envBinding: *newEnvBinding("ns", "b", deploymentRef("", "web", nil), "B", "b"), panicDo: true}
	b.UID, b.Generation = "uid-b", 1
	f.r.Companions = func(string, string, string, string, map[string]string) []Bindable {
		return []Bindable{b, f.binding(t, "ns", "a")}
	}
	if err := f.r.Reconcile(context.Background(), "ns/a"); err != nil {
		t.Fatalf("Reconcile a: %v", err)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "A", Value: "a"}}, f.deploymentEnv(t, "ns", "web")); diff != "" {
		t.Errorf("web's env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("envbindings.test.bindkit.dev/a@uid-a:1", f.deploymentBound(t, "ns", "web")); diff != "" {
		t.Errorf("web's record (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(readyCondition{"True", duck.ReasonBindingAvailable}, ready(f.binding(t, "ns", "a"))); diff != "" {
		t.Errorf("a's Ready (-want +got):\n%s", diff)
	}
}
