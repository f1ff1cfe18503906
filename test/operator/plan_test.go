package operator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/rollout"
	"github.com/bindkit/bindkit/test/testenv"
)

// controlPlane runs workloads (kube-scheduler, kwok nodes, the workload
// controllers) and serves the SinkBinding CRD.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads: true,
	CRDPaths:  []string{"../../examples/sinkbinding/config/300-sinkbinding.yaml"},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

// planView is what kubectl bindkit plan -o json prints.
type planView struct {
	Binding    string           `json:"binding"`
	Generation int64            `json:"generation"`
	Paused     bool             `json:"paused"`
	Plan       *duck.PlanStatus `json:"plan"`
}

// TestHeldBindingPlansWhatResumingApplies creates a SinkBinding over 100
// running Deployments paused, 25 at a time: it changes none of them, and
// publishes a plan (read with kubectl bindkit plan) of four waves whose
// subjects and template changes are, subject by subject, what resuming
// then applies; the state shows in rollout status, events and metrics.
func TestHeldBindingPlansWhatResumingApplies(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "plan-")
	all := names("app", 100)
	createDeployments(t, kube, ns, nil, all...)
	before := deployments(t, kube, ns)
	ctrl := rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/plan", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "25", psbinding.RolloutPausedAnnotation: "true"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var view planView
	code := kubectlJSON(t, env, &view, "plan", "sinkbinding/sink", "-n", ns, "--timeout", "2m")
	wantCode(t, "plan", code, exitChanges)
	predicted := checkPlan(t, view.Plan, before, all)

	out, code := kubectl(t, env, "plan", "sinkbinding/sink", "-n", ns)
	wantCode(t, "plan", code, exitChanges)
	wantLines(t, "plan", out,
		"sinkbinding.bindings.bindkit.dev/sink (namespace "+ns+") is paused. Resuming it rolls out generation 1:",
		"100 subjects selected: 100 to bind, 0 to unbind, 0 unchanged",
		"WAVE  SUBJECTS  NAMES",
		"1     25        app-000, app-001, app-002, app-003 and 21 more",
		"4     25        app-075, app-076, app-077, app-078 and 21 more",
		"bind 100 subjects: app-000, app-001, app-002, app-003, app-004, app-005 and 94 more",
		`+ /spec/template/spec/containers/0/env: [{"name":"K_SINK","value":"https://sink.example.com/plan"}]`,
		"kubectl bindkit rollout resume sinkbinding.bindings.bindkit.dev/sink -n "+ns+" applies it.")

	// Held: no Deployment changed, and the state shows everywhere.
	for name, d := range deployments(t, kube, ns) {
		if d.Generation != before[name].Generation || d.Annotations[duck.BoundAnnotation] != "" || rollout.SinkOf(d) != "" {
			t.Errorf("Deployment %s changed while its Binding is held: generation %d (was %d), bound %q, K_SINK %q",
				name, d.Generation, before[name].Generation, d.Annotations[duck.BoundAnnotation], rollout.SinkOf(d))
		}
	}
	out, code = kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns)
	wantCode(t, "rollout status", code, exitPaused)
	wantLines(t, "rollout status", out, "sinkbinding.bindings.bindkit.dev/sink: rollout paused: rollout of generation 1 paused before its first wave: 100 of 100 subjects to change")
	wantEvents(t, kube, ns, psbinding.ReasonRolloutPaused, "rollout of generation 1 paused before its first wave")
	wantEvents(t, kube, ns, psbinding.ReasonRolloutPlanned, "generation 1 planned: 100 subjects to bind, 0 to unbind, 0 unchanged, in 4 waves")
	wantMetric(t, ctrl, "bindkit_rollouts", map[string]string{"resource": "sinkbindings.bindings.bindkit.dev", "state": "paused"}, 1)

	out, code = kubectl(t, env, "rollout", "resume", "sinkbinding/sink", "-n", ns)
	wantCode(t, "rollout resume", code, exitOK)
	wantLines(t, "rollout resume", out, "sinkbinding.bindings.bindkit.dev/sink resumed")
	out, code = kubectl(t, env, "rollout", "status", "sinkbinding/sink", "-n", ns, "--timeout", "4m")
	wantCode(t, "rollout status", code, exitOK)
	wantLines(t, "rollout status", out, "sinkbinding.bindings.bindkit.dev/sink: generation 1 rolled out: 100 of 100 subjects updated in") // waves: as slots free up

	// What resuming applied is what the plan said, subject by subject.
	for name, d := range deployments(t, kube, ns) {
		if diff := cmp.Diff(predicted[name], d.Spec.Template); diff != "" {
			t.Errorf("Deployment %s: template after resuming differs from the plan's (-plan +applied):\n%s", name, diff)
		}
	}
	if got := getBinding(t, dyn, ns, "sink"); got.Status.Plan != nil {
		t.Errorf("resumed Binding still publishes a plan: %+v", got.Status.Plan)
	}
	wantMetric(t, ctrl, "bindkit_rollouts", map[string]string{"resource": "sinkbindings.bindings.bindkit.dev", "state": "complete"}, 1)
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// checkPlan checks a plan of binding all of names (read before, 25 at a
// time) and returns, for each subject, the template its change gives.
func checkPlan(t *testing.T, p *duck.PlanStatus, before map[string]*appsv1.Deployment, all []string) map[string]corev1.PodTemplateSpec {
	t.Helper()
	if p == nil {
		t.Fatal("no plan")
	}
	if p.Generation != 1 || p.Total != len(all) || p.Bind != len(all) || p.Unbind != 0 || p.Unchanged != 0 || p.NotRead != 0 || p.OtherChanges != 0 || len(p.Errors) != 0 {
		t.Errorf("plan %+v: want generation 1, %d of %d to bind, every one read", p, len(all), len(all))
	}
	var waves []duck.PlanWave
	for i := range 4 {
		waves = append(waves, duck.PlanWave{Number: i + 1, Count: 25, Subjects: all[25*i : 25*i+duck.MaxPlanWaveNames]})
	}
	if diff := cmp.Diff(waves, p.Waves); diff != "" {
		t.Errorf("plan's waves (-want +got):\n%s", diff)
	}
	predicted := map[string]corev1.PodTemplateSpec{}
	for _, c := range p.Changes {
		if c.Action != "bind" || c.Truncated || len(c.Subjects) != c.Count {
			t.Errorf("plan's change %+v: want a bind naming all its subjects", c)
		}
		patch, err := jsonpatch.DecodePatch([]byte(c.Patch))
		if err != nil {
			t.Fatalf("plan's patch %s: %v", c.Patch, err)
		}
		for _, name := range c.Subjects {
			orig, err := json.Marshal(before[name])
			if err != nil {
				t.Fatal(err)
			}
			patched, err := patch.Apply(orig)
			if err != nil {
				t.Fatalf("plan's patch of %s: %v", name, err)
			}
			var d appsv1.Deployment
			if err := json.Unmarshal(patched, &d); err != nil {
				t.Fatal(err)
			}
			predicted[name] = d.Spec.Template
		}
	}
	got := make([]string, 0, len(predicted))
	for name := range predicted {
		got = append(got, name)
	}
	slices.Sort(got)
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("subjects of the plan's changes (-want +got):\n%s", diff)
	}
	return predicted
}

// wantEvents fails the test unless ns has an event of reason whose
// message holds each of want.
func wantEvents(t *testing.T, kube kubernetes.Interface, ns, reason string, want ...string) {
	t.Helper()
	rollout.Poll(t, 30*time.Second, "an event "+reason, func() string {
		events, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			seen = append(seen, e.Message)
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(e.Message, w) }) {
				return ""
			}
		}
		return fmt.Sprintf("events %q", seen)
	})
}

// wantMetric waits until the controller's metrics, scraped as Prometheus
// does (demo.Controller.Metrics), hold name{labels} at value.
func wantMetric(t *testing.T, ctrl *demo.Controller, name string, labels map[string]string, value float64) {
	t.Helper()
	rollout.Poll(t, 30*time.Second, fmt.Sprintf("metric %s%v %g", name, labels, value), func() string {
		f, err := ctrl.Metrics(t.Context())
		if err != nil {
			return err.Error()
		}
		if !f.Has(name, labels) || f.Sum(name, labels) != value {
			return fmt.Sprintf("%s%v = %g", name, labels, f.Sum(name, labels))
		}
		return ""
	})
}
