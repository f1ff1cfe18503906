package psbinding

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

// TestBaseReconcilerLeavesNewerRecordsAlone: a subject whose record of
// the Binding is of a newer format than this bindkit's (a newer release
// wrote it, then was rolled back) is neither bound again nor unbound nor
// rewritten while the Binding lives (duck.RecordFormat); at the Binding's
// deletion it is unbound like any other, and nothing of the record stays.
func TestBaseReconcilerLeavesNewerRecordsAlone(t *testing.T) {
	bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
	keep := corev1.EnvVar{Name: "KEEP", Value: "k"}
	b := newEnvBinding("ns", "gh", deploymentRef("ns", "", matchLabels("app", "web")), "TOKEN", "t")
	b.UID, b.Generation = "u1", 2
	newer := testDeployment("ns", "newer", map[string]string{"app": "web"}, keep, bound)
	records := map[string]string{
		duck.BoundAnnotation:   "envbindings.test.bindkit.dev/gh@u1:v2;2;digest=1",
		duck.RolloutAnnotation: "envbindings.test.bindkit.dev/gh@u1:v2;2;1;1764000000",
	}
	newer.Annotations = records
	unlabelled := testDeployment("ns", "relabelled", map[string]string{"app": "other"}, bound)
	unlabelled.Annotations = map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/gh@u1:v2;1"}
	f := newReconcilerFixture(t, b, newer, unlabelled, testDeployment("ns", "web", map[string]string{"app": "web"}))
	ctx := context.Background()
	if err := f.r.Reconcile(ctx, "ns/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	// web bound; newer and relabelled left as they are.
	if diff := cmp.Diff([]string{"patch/"}, f.writes("deployments")); diff != "" {
		t.Errorf("deployment writes (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"newer": records[duck.BoundAnnotation], "relabelled": unlabelled.Annotations[duck.BoundAnnotation], "web": "envbindings.test.bindkit.dev/gh@u1:2"} {
		if got := f.deploymentBound(t, "ns", name); got != want {
			t.Errorf("%s records %q, want %q", name, got, want)
		}
	}

	// The Binding goes, once the cache has seen web's record: all three
	// are unbound (Undo ran), their records gone.
	f.waitCached(t, "ns", "web", func(m *metav1.PartialObjectMetadata) bool { return m.Annotations[duck.BoundAnnotation] != "" })
	got := f.binding(t, "ns", "gh")
	now := metav1.Now()
	got.DeletionTimestamp = &now
	u := toUnstructured(t, got)
	if _, err := f.client.Resource(envBindingsGVR).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.r.Reconcile(ctx, "ns/gh"); err != nil {
		t.Fatalf("Reconcile the deletion: %v", err)
	}
	for name, want := range map[string][]corev1.EnvVar{"newer": {keep}, "relabelled": nil, "web": nil} {
		if diff := cmp.Diff(want, f.deploymentEnv(t, "ns", name)); diff != "" {
			t.Errorf("%s env after the deletion (-want +got):\n%s", name, diff)
		}
		u, err := f.client.Resource(deploymentsGVR).Namespace("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ann := u.GetAnnotations(); duck.Names(ann, duck.BoundBy{Resource: envBindingsGVR.GroupResource(), Name: "gh", UID: "u1"}) {
			t.Errorf("%s keeps records of the deleted Binding: %v", name, ann)
		}
	}
}
