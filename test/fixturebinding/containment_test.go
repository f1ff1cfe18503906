package fixturebinding_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/fixturebinding"
)

const panicLabel = "fixture.bindkit.dev/panic"

// A Binding whose Do panics on one subject ends neither the process nor
// the work of anything else: through sharedmain with two Binding kinds,
// controller and webhook each, against the real kube-apiserver, the
// panicking Binding is not Ready with BindingPanicked naming the subject
// and the panic, its other subjects are bound, admission refuses only the
// subject it panics on, and for 60 seconds a second Binding of the kind and
// a Binding of the other kind bind new subjects on both paths. The stack is
// logged at most once per retry. A restarted process does not crash either.
func TestPanickingDoIsContainedWithRealAPIServer(t *testing.T) {
	r := newRig(t)
	ns := r.env.CreateNamespace(t, "containment-")
	for _, d := range []struct {
		name   string
		labels map[string]string
	}{
		{"calm", map[string]string{"app": "web"}},
		{"bomb", map[string]string{"app": "web", panicLabel: "true"}},
	} {
		if _, err := r.deployment(ns, d.name, d.labels); err != nil {
			t.Fatal(err)
		}
	}
	r.binding(fixturebinding.Kind, ns, "bad", "web", fixturebinding.Spec{PanicOnLabel: panicLabel})
	r.binding(fixturebinding.OtherKind, ns, "other", "web", fixturebinding.Spec{})

	msg := r.waitReady(fixturebinding.Kind, ns, "bad", "False", psbinding.ReasonBindingPanicked)
	for _, want := range []string{"bomb", "fixture panic on " + ns + "/bomb", "Do panicked"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not contain %q", msg, want)
		}
	}
	r.waitBound(ns, "calm", fixturebinding.Kind, "bad") // its other subject
	r.waitBound(ns, "calm", fixturebinding.OtherKind, "other")
	r.waitBound(ns, "bomb", fixturebinding.OtherKind, "other") // the other kind binds the subject bad panics on
	r.waitReady(fixturebinding.OtherKind, ns, "other", "True", "BindingAvailable")
	// The kube-apiserver loads each webhook configuration some time after
	// the process programs it, each on its own: probe both before creating.
	web := map[string]string{"app": "web"}
	r.waitAdmission(ns, "probe", web, boundBy(fixturebinding.Kind, "bad", fixturebinding.OtherKind, "other"))
	r.waitAdmission(ns, "bomb-probe", map[string]string{"app": "web", panicLabel: "true"}, refused("panicked", "fixture panic on "+ns+"/bomb-probe"))

	// Admission: the subject bad panics on is refused with the panic's
	// message; others are bound at creation by every kind.
	_, err := r.deployment(ns, "bomb-2", map[string]string{"app": "web", panicLabel: "true"})
	if err == nil || !strings.Contains(err.Error(), "panicked") || !strings.Contains(err.Error(), "fixture panic on "+ns+"/bomb-2") {
		t.Errorf("create of a subject bad panics on: got %v, want a refusal naming the panic", err)
	}

	start := time.Now()
	for i := 0; time.Since(start) < 60*time.Second; i++ {
		r.running()
		// Admission path, both kinds (and bad, on a subject it does not panic on).
		name := fmt.Sprintf("web-%d", i)
		d, err := r.deployment(ns, name, map[string]string{"app": "web"})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if v, ok := env(d, fixturebinding.OtherKind); !ok || v != "other" {
			t.Errorf("%s: not bound by OtherFixtureBinding other at creation: %v", name, d.Spec.Template.Spec.Containers[0].Env)
		}
		if v, ok := env(d, fixturebinding.Kind); !ok || v != "bad" {
			t.Errorf("%s: not bound by FixtureBinding bad at creation: %v", name, d.Spec.Template.Spec.Containers[0].Env)
		}
		// Reconciler path: new Bindings of both kinds over a subject that
		// exists already.
		app := fmt.Sprintf("late-%d", i)
		if _, err := r.deployment(ns, app, map[string]string{"app": app}); err != nil {
			t.Fatal(err)
		}
		r.binding(fixturebinding.Kind, ns, "good-"+app, app, fixturebinding.Spec{})
		r.binding(fixturebinding.OtherKind, ns, "other-"+app, app, fixturebinding.Spec{})
		r.waitBound(ns, app, fixturebinding.Kind, "good-"+app)
		r.waitBound(ns, app, fixturebinding.OtherKind, "other-"+app)
		time.Sleep(5 * time.Second)
	}
	r.running()
	if c, err := r.ready(fixturebinding.Kind, ns, "bad"); err != nil || c["reason"] != psbinding.ReasonBindingPanicked {
		t.Errorf("after a minute, bad's Ready is %v (%v), want reason %s", c, err, psbinding.ReasonBindingPanicked)
	}
	// The stack at most once per retry, and the retries back off: a
	// minute of doubling waits from 5ms is about fourteen attempts.
	stacks := r.logs.count("binding panicked; its other subjects are bound", `"binding":"binding `+ns+`/bad"`)
	retries := r.logs.count("reconcile failed", `"key":"`+ns+`/bad"`)
	if stacks == 0 || stacks > retries {
		t.Errorf("%d stacks logged for %d failed reconciles of bad: want at least one and at most one per reconcile", stacks, retries)
	}
	if retries > 30 {
		t.Errorf("%d failed reconciles of bad in a minute: the retries do not back off", retries)
	}
	if n := r.logs.count("binding panicked in admission", `"binding":"binding `+ns+`/bad"`); n != 1 {
		t.Errorf("%d admission stacks logged for bad, want 1 (once per generation)", n)
	}
	t.Logf("in 60s: %d failed reconciles of bad (retries and subject events), %d stacks logged", retries, stacks)

	// A restart finds the same Binding and does not crash either.
	r.stop()
	r.start()
	// start re-points both webhook configurations; the kube-apiserver calls
	// the new port only once it has loaded them.
	r.waitAdmission(ns, "probe-after-restart", web, boundBy(fixturebinding.Kind, "bad", fixturebinding.OtherKind, "other"))
	r.running()
	r.waitReady(fixturebinding.Kind, ns, "bad", "False", psbinding.ReasonBindingPanicked)
	if _, err := r.deployment(ns, "after-restart", map[string]string{"app": "web"}); err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	r.waitBound(ns, "after-restart", fixturebinding.OtherKind, "other")
	r.running()
	r.audit(ns)
}

// A WithContext that panics is contained the same way: the Binding is not
// Ready with BindingPanicked, admission refuses its subjects with the
// panic's message, and the other kind goes on.
func TestPanickingWithContextIsContainedWithRealAPIServer(t *testing.T) {
	r := newRig(t)
	ns := r.env.CreateNamespace(t, "withcontext-")
	if _, err := r.deployment(ns, "web", map[string]string{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	r.binding(fixturebinding.Kind, ns, "bad", "web", fixturebinding.Spec{PanicInWithContext: true})
	r.binding(fixturebinding.OtherKind, ns, "other", "web", fixturebinding.Spec{})
	msg := r.waitReady(fixturebinding.Kind, ns, "bad", "False", psbinding.ReasonBindingPanicked)
	if !strings.Contains(msg, "WithContext panicked") || !strings.Contains(msg, "fixture panic in WithContext") {
		t.Errorf("Ready message %q does not name the panic", msg)
	}
	r.waitBound(ns, "web", fixturebinding.OtherKind, "other")
	// The kube-apiserver loads the webhook configuration some time after the
	// process programs it.
	r.waitAdmission(ns, "probe", map[string]string{"app": "web"}, refused("WithContext panicked"))
	_, err := r.deployment(ns, "web-2", map[string]string{"app": "web"})
	if err == nil || !strings.Contains(err.Error(), "WithContext panicked") {
		t.Errorf("create of a subject of a Binding whose WithContext panics: got %v, want a refusal naming the panic", err)
	}
	if _, err := r.deployment(ns, "elsewhere", map[string]string{"app": "elsewhere"}); err != nil {
		t.Errorf("create of a subject no Binding selects: %v", err)
	}
	r.running()
	r.audit(ns)
}

// A subject patch the API server refuses shows the API server's words on
// the Binding; a Do that is not idempotent is reported as such.
func TestRefusedPatchQuotesTheAPIServerWithRealAPIServer(t *testing.T) {
	r := newRig(t)
	ns := r.env.CreateNamespace(t, "refused-")
	// Subjects exist before their Bindings, so the reconciler, not
	// admission, makes the patch.
	if _, err := r.deployment(ns, "blank", map[string]string{"app": "blank"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.deployment(ns, "dup", map[string]string{"app": "dup"}, "app", "fixture"); err != nil {
		t.Fatal(err)
	}
	r.binding(fixturebinding.Kind, ns, "clear-image", "blank", fixturebinding.Spec{ClearImage: true})
	r.binding(fixturebinding.Kind, ns, "append", "dup", fixturebinding.Spec{AppendContainer: true})

	msg := r.waitReady(fixturebinding.Kind, ns, "clear-image", "False", psbinding.ReasonSubjectPatchFailed)
	for _, want := range []string{"deployments.apps " + ns + "/blank", "422 Invalid", "spec.template.spec.containers[0].image", "Required value"} {
		if !strings.Contains(msg, want) {
			t.Errorf("clear-image: Ready message %q does not contain %q", msg, want)
		}
	}
	msg = r.waitReady(fixturebinding.Kind, ns, "append", "False", psbinding.ReasonDoNotIdempotent)
	for _, want := range []string{"deployments.apps " + ns + "/dup", "Do is not idempotent", "/spec/template/spec/containers", "Duplicate value"} {
		if !strings.Contains(msg, want) {
			t.Errorf("append: Ready message %q does not contain %q", msg, want)
		}
	}
	r.running()
	// A refused patch leaves no record.
	r.audit(ns)
}

// --uninstall with a Binding whose Undo panics on one subject: the process
// reports the panic and exits with an error instead of crashing; the
// Binding's other subjects, and the other kind's, are unbound.
func TestUninstallContainsPanicsWithRealAPIServer(t *testing.T) {
	r := newRig(t)
	ns := r.env.CreateNamespace(t, "uninstall-")
	if _, err := r.deployment(ns, "calm", map[string]string{"app": "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.deployment(ns, "bomb", map[string]string{"app": "web", panicLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	// bad binds both, then turns to panicking on bomb.
	r.binding(fixturebinding.Kind, ns, "bad", "web", fixturebinding.Spec{})
	r.binding(fixturebinding.OtherKind, ns, "other", "web", fixturebinding.Spec{})
	r.waitBound(ns, "bomb", fixturebinding.Kind, "bad")
	r.waitBound(ns, "bomb", fixturebinding.OtherKind, "other")
	patch := fmt.Sprintf(`{"spec":{"panicOnLabel":%q}}`, panicLabel)
	if _, err := r.dyn.Resource(fixturebinding.GVR(fixturebinding.Kind)).Namespace(ns).Patch(context.Background(), "bad", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitReady(fixturebinding.Kind, ns, "bad", "False", psbinding.ReasonBindingPanicked)
	r.stop()

	err := r.uninstall()
	if err == nil || !strings.Contains(err.Error(), "Undo panicked on subject deployments.apps "+ns+"/bomb") {
		t.Errorf("--uninstall: %v, want an error naming the panic", err)
	}
	for _, c := range []struct{ name, kind string }{{"calm", fixturebinding.Kind}, {"calm", fixturebinding.OtherKind}, {"bomb", fixturebinding.OtherKind}} {
		d, err := r.kube.AppsV1().Deployments(ns).Get(context.Background(), c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := env(d, c.kind); ok {
			t.Errorf("%s still bound by %s after --uninstall (%s)", c.name, c.kind, v)
		}
	}
	r.audit(ns)
}

// waitAdmission polls a server-side dry-run create of a Deployment ns/name
// with labels until check, given the kube-apiserver's answer, returns "";
// on timeout it reports check's last reason. The kube-apiserver loads each
// webhook configuration some time after it is written, so what the stored
// configuration says is not yet what admission does: only a create shows.
func (r *rig) waitAdmission(ns, name string, labels map[string]string, check func(*appsv1.Deployment, error) string) {
	r.t.Helper()
	d := newDeployment(ns, name, labels)
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := r.kube.AppsV1().Deployments(ns).Create(ctx, d.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		last = check(got, err)
		return last == "", nil
	})
	if err != nil {
		r.t.Fatalf("dry-run create of Deployment %s/%s: %v (last: %s)\nlog tail:\n%s", ns, name, err, last, r.logs.tail(30))
	}
}

// boundBy is a waitAdmission check: the create is admitted, bound by each
// kind with its value (kind, value, kind, value, ...).
func boundBy(kindValues ...string) func(*appsv1.Deployment, error) string {
	return func(d *appsv1.Deployment, err error) string {
		if err != nil {
			return err.Error()
		}
		for i := 0; i+1 < len(kindValues); i += 2 {
			if v, ok := env(d, kindValues[i]); !ok || v != kindValues[i+1] {
				return fmt.Sprintf("admitted without %s=%s: %v", fixturebinding.EnvName(kindValues[i]), kindValues[i+1], d.Spec.Template.Spec.Containers[0].Env)
			}
		}
		return ""
	}
}

// refused is a waitAdmission check: the create is refused, the refusal
// holding every substring.
func refused(substrings ...string) func(*appsv1.Deployment, error) string {
	return func(d *appsv1.Deployment, err error) string {
		if err == nil {
			return fmt.Sprintf("admitted: %v", d.Spec.Template.Spec.Containers[0].Env)
		}
		for _, s := range substrings {
			if !strings.Contains(err.Error(), s) {
				return err.Error()
			}
		}
		return ""
	}
}
