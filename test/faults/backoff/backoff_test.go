package backoff_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

const repoRoot = "../../.."

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{repoRoot + "/" + faults.CRDPath}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

// A Binding whose subject cannot be patched for longer than the old retry
// budget (15 retries, about 166 s) recovers within one backoff step once
// the cause is gone, with no event in between to wake it.
func TestBindingRecoversAfterALongFailureWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := h.Namespace("outlast-")
	ctx := context.Background()
	remove := h.DenyUpdates()
	if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, "web", "guarded"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Binding(ns, "gh", "guarded", "")
	h.WaitReady(ns, "gh", metav1.ConditionFalse, psbinding.ReasonSubjectPatchFailed, 30*time.Second)
	time.Sleep(170 * time.Second)
	c, current, err := h.Ready(ns, "gh")
	if err != nil || !current || c.Reason != psbinding.ReasonSubjectPatchFailed {
		t.Fatalf("before the fix: Ready %s/%s (current %v, %v), want still failing", c.Status, c.Reason, current, err)
	}
	remove()
	fixed := time.Now()
	// The cap of the backoff is a minute: one step, and a little for the
	// patch itself.
	h.WaitReady(ns, "gh", metav1.ConditionTrue, duck.ReasonBindingAvailable, 75*time.Second)
	t.Logf("recovered %v after the cause was removed", time.Since(fixed))
	got, err := h.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || !faults.Bound(got) {
		t.Errorf("subject not bound: %v", err)
	}
	h.Audit(ns)
}
