package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/rollout"
)

// TestPauseStopsAfterTheWaveInFlightAndUndoRestores rolls a SinkBinding
// out over 20 running Deployments, 2 at a time, edits it, and pauses the
// edit's rollout once its first wave started (kubectl bindkit rollout
// pause): no wave starts after the one in flight, a Deployment created
// meanwhile gets nothing, and the plan says what is left. Undone (kubectl
// bindkit rollout undo), every subject's template is again what it was
// when the first generation had rolled out, the new Deployment included.
func TestPauseStopsAfterTheWaveInFlightAndUndoRestores(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "undo-")
	all := names("app", 20)
	createDeployments(t, kube, ns, nil, all...)
	ctrl := rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/v1", "", map[string]any{psbinding.RolloutMaxChangingAnnotation: "2"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code := kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--timeout", "4m")
	wantCode(t, "rollout status", code, exitOK)
	wantLines(t, "rollout status", out, "generation 1 rolled out: 20 of 20 subjects updated in") // waves: as slots free up
	complete := map[string]corev1.PodTemplateSpec{}
	for name, d := range deployments(t, kube, ns) {
		complete[name] = d.Spec.Template
	}
	rollout.Poll(t, 30*time.Second, "generation 1 in the rollout history", func() string {
		h, err := psbinding.HistoryOf(getBinding(t, dyn, ns, "sink").Annotations)
		if err != nil || len(h) == 0 || h[0].Generation != 1 {
			return fmt.Sprintf("history %+v, %v", h, err)
		}
		return ""
	})

	setSink(t, dyn, ns, "sink", "https://sink.example.com/v2")
	rollout.Poll(t, time.Minute, "the first wave of generation 2", func() string {
		if n, _ := atGeneration(t, kube, ns, 2); n == 0 {
			return "no Deployment carries generation 2"
		}
		return ""
	})
	out, code = kubectl(t, env, "rollout", "pause", "sinkbinding/sink", "-n", ns)
	wantCode(t, "rollout pause", code, exitOK)
	wantLines(t, "rollout pause", out, "sinkbinding.bindings.bindkit.dev/sink paused")
	var paused *duck.RolloutStatus
	rollout.Poll(t, time.Minute, "the rollout to pause, its waves in flight done", func() string {
		got := getBinding(t, dyn, ns, "sink")
		if readyReason(got) != psbinding.ReasonRolloutPaused || got.Status.Rollout == nil || !got.Status.Rollout.Paused || len(got.Status.Rollout.Changing) > 0 {
			return fmt.Sprintf("Ready %q, rollout %+v", readyReason(got), got.Status.Rollout)
		}
		paused = got.Status.Rollout
		return ""
	})
	// Stopped after the wave in flight: nothing more for a while.
	changed, lastWave := atGeneration(t, kube, ns, 2)
	if lastWave > paused.Wave || changed > 2*paused.Wave || changed == len(all) {
		t.Errorf("paused at wave %d: %d Deployments carry generation 2, the last changed by wave %d", paused.Wave, changed, lastWave)
	}
	createDeployments(t, kube, ns, nil, "late-000")
	time.Sleep(8 * time.Second)
	if n, w := atGeneration(t, kube, ns, 2); n != changed || w != lastWave {
		t.Errorf("paused: %d Deployments carry generation 2 (last wave %d) 8s later, %d (wave %d) at the pause", n, w, changed, lastWave)
	}
	late := deployments(t, kube, ns)["late-000"]
	if rollout.SinkOf(late) != "" || late.Annotations[duck.BoundAnnotation] != "" {
		t.Errorf("Deployment created while paused got the Binding: K_SINK %q, bound %q", rollout.SinkOf(late), late.Annotations[duck.BoundAnnotation])
	}
	var view planView
	code = kubectlJSON(t, env, &view, "plan", "sinkbinding/sink", "-n", ns)
	wantCode(t, "plan", code, exitChanges)
	if p := view.Plan; p == nil || p.Generation != 2 || p.Bind != len(all)+1-changed || p.Unchanged != changed || len(p.Waves) == 0 || p.Waves[0].Number != paused.Wave+1 {
		t.Errorf("plan of the paused rollout %+v: want generation 2, %d to bind from wave %d, %d unchanged", p, len(all)+1-changed, paused.Wave+1, changed)
	}
	out, code = kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--watch=false")
	wantCode(t, "rollout status", code, exitPaused)
	wantLines(t, "rollout status", out, fmt.Sprintf("rollout paused: rollout of generation 2 paused after wave %d: %d of 21 subjects updated", paused.Wave, changed))

	out, code = kubectl(t, env, "rollout", "undo", "sinkbinding/sink", "-n", ns)
	wantCode(t, "rollout undo", code, exitOK)
	wantLines(t, "rollout undo", out, "sinkbinding.bindings.bindkit.dev/sink rolling back: generation 2 undone, its subjects brought back to generation 1")
	out, code = kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--timeout", "4m")
	wantCode(t, "rollout status", code, exitOK)
	wantLines(t, "rollout status", out, "sinkbinding.bindings.bindkit.dev/sink: rollout undone: generation 2 undone: every subject carries generation 1")
	for name, d := range deployments(t, kube, ns) {
		if name == "late-000" {
			if rollout.SinkOf(d) != "https://sink.example.com/v1" {
				t.Errorf("Deployment %s created while paused: K_SINK %q after the undo, want generation 1's", name, rollout.SinkOf(d))
			}
			continue
		}
		if diff := cmp.Diff(complete[name], d.Spec.Template); diff != "" {
			t.Errorf("Deployment %s after the undo differs from its template at the last complete generation (-then +now):\n%s", name, diff)
		}
	}
	wantEvents(t, kube, ns, psbinding.ReasonUndoingRollout, "undoing generation 2")
	wantEvents(t, kube, ns, psbinding.ReasonRolloutUndone, "generation 2 undone")
	wantMetric(t, ctrl, "bindkit_rollouts", map[string]string{"resource": "sinkbindings.bindings.bindkit.dev", "state": "undone"}, 1)
	out, code = kubectl(t, env, "why", "deployment/app-000", "-n", ns)
	wantCode(t, "why", code, exitOK)
	wantLines(t, "why", out, "BINDING", "sinkbinding.bindings.bindkit.dev/sink  1        2        undone  RolloutUndone",
		// What it carries: generation 1's values, not generation 2's.
		"carries generation 1; its spec (from the rollout history) and generation 2's differ in: sink: https://sink.example.com/v1 -> https://sink.example.com/v2",
		"carries in its pod template: env K_SINK=https://sink.example.com/v1",
		"generation 2 adds: env K_SINK=https://sink.example.com/v2")
	var why struct {
		Bindings []struct {
			CarriedFrom string
			CarriedSpec struct{ Sink string }
		}
	}
	wantCode(t, "why -o json", kubectlJSON(t, env, &why, "why", "deployment/app-000", "-n", ns), exitOK)
	if len(why.Bindings) != 1 || why.Bindings[0].CarriedFrom != "rollout-history" || why.Bindings[0].CarriedSpec.Sink != "https://sink.example.com/v1" {
		t.Errorf("why deployment/app-000 -o json: %+v, want generation 1's spec (sink v1) from the rollout history", why.Bindings)
	}
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// atGeneration counts the Deployments of ns whose bound record names gen,
// and the last wave that changed one of them.
func atGeneration(t *testing.T, kube kubernetes.Interface, ns string, gen int64) (n, lastWave int) {
	t.Helper()
	for _, d := range deployments(t, kube, ns) {
		for by, g := range duck.BoundOf(d.Annotations) {
			if g != gen {
				continue
			}
			n++
			if c, ok := duck.ChangesOf(d.Annotations).Lookup(by); ok && c.Generation == gen {
				lastWave = max(lastWave, c.Wave)
			}
		}
	}
	return n, lastWave
}

// TestWhyNamesTheBindingsOfAWorkload binds a Deployment with three
// SinkBindings (of three selectors) and another with a fourth, then
// pauses and edits one of the three: kubectl bindkit why names exactly
// the three, the generation the Deployment carries of each against the
// current one, their state and what each adds.
func TestWhyNamesTheBindingsOfAWorkload(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "why-")
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sink-ca"}, StringData: map[string]string{"ca.crt": "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDeployments(t, kube, ns, map[string]string{"tier": "front", "team": "shop", "cache": "yes"}, "web")
	createDeployments(t, kube, ns, map[string]string{"tier": "back"}, "db")
	rollout.StartController(t, env)
	const sink = "https://sink.example.com/shop"
	for _, b := range []struct {
		name   string
		labels map[string]any
	}{{"a-front", map[string]any{"tier": "front"}}, {"b-certs", map[string]any{"team": "shop"}}, {"c-cache", map[string]any{"cache": "yes"}}, {"d-back", map[string]any{"tier": "back"}}} {
		u := rollout.SinkBinding(ns, b.name, b.labels, sink, "", nil)
		if b.name == "b-certs" {
			u.Object["spec"].(map[string]any)["caCertsSecret"] = "sink-ca"
		}
		if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rollout.Poll(t, time.Minute, "web bound by three Bindings, db by one", func() string {
		ds := deployments(t, kube, ns)
		if w, d := len(duck.BoundOf(ds["web"].Annotations)), len(duck.BoundOf(ds["db"].Annotations)); w != 3 || d != 1 {
			return fmt.Sprintf("web records %d, db %d", w, d)
		}
		return ""
	})
	out, code := kubectl(t, env, "rollout", "pause", "sinkbinding/c-cache", "-n", ns)
	wantCode(t, "rollout pause", code, exitOK)
	wantLines(t, "rollout pause", out, "sinkbinding.bindings.bindkit.dev/c-cache paused")
	setSink(t, dyn, ns, "c-cache", "https://sink.example.com/cache")
	rollout.Poll(t, time.Minute, "c-cache paused at generation 2", func() string {
		if r := readyReason(getBinding(t, dyn, ns, "c-cache")); r != psbinding.ReasonRolloutPaused {
			return "Ready " + r
		}
		return ""
	})

	out, code = kubectl(t, env, "why", "deployment/web", "-n", ns)
	wantCode(t, "why", code, exitOK)
	wantLines(t, "why", out,
		"deployment.apps/web (namespace "+ns+") records 3 Bindings:",
		"BINDING                                      CARRIES  CURRENT  STATE     REASON",
		"sinkbinding.bindings.bindkit.dev/a-front     1        1        complete  BindingAvailable",
		"sinkbinding.bindings.bindkit.dev/b-certs     1        1        complete  BindingAvailable",
		"sinkbinding.bindings.bindkit.dev/c-cache     1        2        paused    RolloutPaused",
		"sinkbinding.bindings.bindkit.dev/a-front:",
		"adds: env K_SINK="+sink,
		"sinkbinding.bindings.bindkit.dev/b-certs:",
		"adds: env K_SINK="+sink+"; env K_CA_CERTS=/var/run/sinkbinding/ca-certs; mount sinkbinding-ca-certs at /var/run/sinkbinding/ca-certs; volume sinkbinding-ca-certs",
		"sinkbinding.bindings.bindkit.dev/c-cache:",
		"carries generation 1, whose spec is not recorded",
		"carries in its pod template: env K_SINK="+sink,
		"generation 2 adds: env K_SINK=https://sink.example.com/cache",
		"rollout of generation 2 paused before its first wave: 1 of 1 subjects to change")
	if strings.Contains(out, "d-back") {
		t.Errorf("why deployment/web names d-back, which selects db only:\n%s", out)
	}
	var view struct {
		Bindings []struct {
			Binding           string
			Recorded, Current int64
			State             string
		}
	}
	code = kubectlJSON(t, env, &view, "why", "deployment/db", "-n", ns)
	wantCode(t, "why", code, exitOK)
	if len(view.Bindings) != 1 || view.Bindings[0].Binding != "sinkbinding.bindings.bindkit.dev/d-back" || view.Bindings[0].Recorded != 1 || view.Bindings[0].Current != 1 || view.Bindings[0].State != "complete" {
		t.Errorf("why deployment/db: %+v, want d-back alone, at generation 1, complete", view.Bindings)
	}
	out, code = kubectl(t, env, "why", "deployment/nosuch", "-n", ns)
	wantCode(t, "why of a missing workload", code, exitError)
	_ = out
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// TestHaltedRolloutIsUndone rolls a SinkBinding out over 6 running
// Deployments, then edits it to add a forwarder sidecar that never becomes
// Ready: the rollout halts on its first wave (kubectl bindkit rollout
// status exits 5 and says why), and kubectl bindkit rollout undo brings
// every Deployment back to its template of the first generation, the
// halted wave's included.
func TestHaltedRolloutIsUndone(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "halt-")
	createDeployments(t, kube, ns, nil, names("app", 6)...)
	rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/v1", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "2", psbinding.RolloutDeadlineAnnotation: "15s"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, code := kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--timeout", "3m")
	wantCode(t, "rollout status", code, exitOK)
	complete := map[string]corev1.PodTemplateSpec{}
	for name, d := range deployments(t, kube, ns) {
		complete[name] = d.Spec.Template
	}

	patch := fmt.Sprintf(`{"spec":{"forwarderImage":%q}}`, envtest.FailingImage)
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Patch(ctx, "sink", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code := kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--timeout", "3m")
	wantCode(t, "rollout status", code, exitHalted)
	wantLines(t, "rollout status", out, "sinkbinding.bindings.bindkit.dev/sink: rollout halted: rollout of generation 2 halted at wave 1: app-000: ")
	out, code = kubectl(t, env, "why", "deployment/app-000", "-n", ns)
	wantCode(t, "why", code, exitOK)
	wantLines(t, "why", out, "deployment.apps/app-000 (namespace "+ns+") records 1 Binding:",
		"sinkbinding.bindings.bindkit.dev/sink 2 2 halted RolloutHalted",
		"adds: env K_SINK=https://sink.example.com/v1; container sink-forwarder ("+envtest.FailingImage+")",
		"changed to generation 2 by wave 1 at ")

	out, code = kubectl(t, env, "rollout", "undo", "sinkbinding/sink", "-n", ns)
	wantCode(t, "rollout undo", code, exitOK)
	wantLines(t, "rollout undo", out, "generation 2 undone, its subjects brought back to generation 1")
	_, code = kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--timeout", "3m")
	wantCode(t, "rollout status", code, exitOK)
	for name, d := range deployments(t, kube, ns) {
		if diff := cmp.Diff(complete[name], d.Spec.Template); diff != "" {
			t.Errorf("Deployment %s after the undo differs from its template at the last complete generation (-then +now):\n%s", name, diff)
		}
	}
	rollout.Poll(t, 2*time.Minute, "every Deployment to roll its undone template out", func() string {
		for name, d := range deployments(t, kube, ns) {
			if !rollout.RolledOut(t, d) {
				return name + " not rolled out"
			}
		}
		return ""
	})
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}
