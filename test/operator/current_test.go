package operator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/rollout"
)

// TestAdmissionFollowsTheRolloutThroughExampleBinary runs the sinkbinding
// example binary on both admission paths (its default flags: the
// MutatingAdmissionPolicy; --declarative-admission=webhook) over four
// running Deployments and a Binding that rolls out two at a time: a
// Deployment created once the rollout completed comes back bound, at the
// generation that completed, with no wave; after the next generation
// halted (a sidecar that never becomes ready), one created gets nothing of
// the halted generation. Admission reads the Binding's rollout as it is
// now: the webhook's index was rebuilt only when a Binding's metadata
// changed, so the completion never reached it.
func TestAdmissionFollowsTheRolloutThroughExampleBinary(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "by policy"},
		{name: "by webhook", args: []string{"--declarative-admission=webhook"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := controlPlane.Env(t)
			ctx := t.Context()
			kube := kubernetes.NewForConfigOrDie(env.Config)
			dyn := dynamic.NewForConfigOrDie(env.Config)
			ns := env.CreateNamespace(t, "follows-")
			createDeployments(t, kube, ns, nil, names("app", 4)...)
			ctrl := rollout.StartController(t, env, tc.args...)
			if len(tc.args) > 0 {
				installWebhook(t, kube, ctrl)
			}
			b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/1", "",
				map[string]any{psbinding.RolloutMaxChangingAnnotation: "2", psbinding.RolloutDeadlineAnnotation: "20s", psbinding.RolloutRollbackAnnotation: "true"})
			if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			rollout.Poll(t, 3*time.Minute, "generation 1 to roll out", func() string {
				if got := getBinding(t, dyn, ns, "sink"); readyReason(got) != "Ready" {
					return fmt.Sprintf("Ready reason %q, rollout %+v", readyReason(got), got.Status.Rollout)
				}
				return ""
			})
			// Created after the rollout completed: bound at admission.
			late := createdBound(t, kube, ns, "late", "https://sink.example.com/1")
			if gen, _ := duck.BoundGeneration(late.Annotations, boundBy(t, dyn, ns, "sink")); gen != 1 {
				t.Errorf("Deployment late records generation %d, want 1: %q", gen, late.Annotations[duck.BoundAnnotation])
			}

			// Generation 2 halts: its sidecar never becomes ready.
			patch := fmt.Sprintf(`{"spec":{"sink":"https://sink.example.com/2","forwarderImage":%q}}`, envtest.FailingImage)
			if _, err := dyn.Resource(sinkBindings).Namespace(ns).Patch(ctx, "sink", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			rollout.Poll(t, 3*time.Minute, "generation 2's rollout to halt", func() string {
				if r := readyReason(getBinding(t, dyn, ns, "sink")); r != psbinding.ReasonRolloutHalted {
					return fmt.Sprintf("Ready reason %q", r)
				}
				return ""
			})
			rollout.CreateDeployment(t, kube, ns, "after-halt", map[string]string{"app": "web"})
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "after-halt", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if gen, recorded := duck.BoundGeneration(d.Annotations, boundBy(t, dyn, ns, "sink")); rollout.SinkOf(d) == "https://sink.example.com/2" || len(d.Spec.Template.Spec.Containers) != 1 || (recorded && gen == 2) {
				t.Errorf("Deployment after-halt, created after generation 2 halted, got it: K_SINK %q, %d containers, bound %q",
					rollout.SinkOf(d), len(d.Spec.Template.Spec.Containers), d.Annotations[duck.BoundAnnotation])
			}
			bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
		})
	}
}

// createdBound polls a dry-run create of a Deployment ns/name labelled
// app=web until admission binds it with sink (the kube-apiserver loads
// what admission reads some time after it is written), then creates it
// and returns what the API server stored.
func createdBound(t *testing.T, kube kubernetes.Interface, ns, name, sink string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
	rollout.Poll(t, 30*time.Second, "admission to bind a Deployment "+name, func() string {
		got, err := kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error()
		}
		if s := rollout.SinkOf(got); s != sink {
			return fmt.Sprintf("K_SINK %q", s)
		}
		return ""
	})
	got, err := kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := rollout.SinkOf(got); s != sink {
		t.Errorf("Deployment %s created with K_SINK %q, want %q", name, s, sink)
	}
	return got
}

// boundBy is how the SinkBinding ns/name appears in a subject's record.
func boundBy(t *testing.T, dyn dynamic.Interface, ns, name string) duck.BoundBy {
	b := getBinding(t, dyn, ns, name)
	return duck.BoundBy{Resource: sinkBindings.GroupResource(), Name: name, UID: b.UID}
}

// installWebhook installs the example's webhook configuration pointed at
// ctrl, as a deployment does, and removes it at the test's end, after
// ctrl stops.
func installWebhook(t *testing.T, kube kubernetes.Interface, ctrl *demo.Controller) {
	t.Helper()
	cfg, err := demo.WebhookConfigurationAt(filepath.Join(rollout.RepoRoot, "examples/sinkbinding/config/500-webhook-configuration.yaml"), ctrl.WebhookPort)
	if err == nil {
		err = demo.InstallWebhookConfiguration(t.Context(), kube, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if exited, _ := ctrl.Exited(); !exited {
			ctrl.Stop()
		}
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// TestNoOpEditChangesNoGenerationThroughExampleBinary: a Binding rolled out
// one at a time (25% of the four Deployments it can bind; a fifth it
// selects is excluded, and counted would make it two) is edited, paused, in a way that changes no
// template (its subject's namespace written out): the plan counts no
// template change and no subject to write, and its totals count the four;
// resumed, the edit's generation is in force at once and no Deployment is
// written: their generations, templates and records stay as they were.
func TestNoOpEditChangesNoGenerationThroughExampleBinary(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "noop-")
	createDeployments(t, kube, ns, nil, names("app", 4)...)
	createDeployments(t, kube, ns, map[string]string{psbinding.ExcludeLabel: "true"}, "excluded")
	rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/1", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "25%"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, 3*time.Minute, "generation 1 to roll out", func() string {
		if got := getBinding(t, dyn, ns, "sink"); readyReason(got) != "Ready" {
			return fmt.Sprintf("Ready reason %q, rollout %+v", readyReason(got), got.Status.Rollout)
		}
		return ""
	})
	if ro := getBinding(t, dyn, ns, "sink").Status.Rollout; ro == nil || ro.Total != 4 || ro.Updated != 4 || ro.Wave != 4 {
		t.Errorf("generation 1's rollout %+v, want 4 of 4 subjects (not the excluded one) updated in 4 waves of 25%%", ro)
	}
	before := deployments(t, kube, ns)

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}},"spec":{"subject":{"namespace":%q}}}`, psbinding.RolloutPausedAnnotation, ns)
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Patch(ctx, "sink", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var plan *duck.PlanStatus
	rollout.Poll(t, time.Minute, "the paused edit's plan", func() string {
		got := getBinding(t, dyn, ns, "sink")
		if plan = got.Status.Plan; plan == nil || plan.Generation != got.Generation || got.Status.ObservedGeneration != got.Generation {
			return fmt.Sprintf("plan %+v", plan)
		}
		return ""
	})
	if plan.TemplateChanges != 0 || plan.RecordsOnly != 0 || plan.Bind != 0 || plan.Unchanged != 4 || plan.Total != 4 || len(plan.Waves) != 0 {
		t.Errorf("plan of an edit that changes no template: %+v; want no template change, nothing to write, 4 of 4 unchanged, no wave", plan)
	}
	unpause := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, psbinding.RolloutPausedAnnotation)
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Patch(ctx, "sink", types.MergePatchType, []byte(unpause), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, time.Minute, "generation 2 in force", func() string {
		got := getBinding(t, dyn, ns, "sink")
		if readyReason(got) != "Ready" || !got.Status.Rollout.Complete(got.Generation) {
			return fmt.Sprintf("Ready reason %q, rollout %+v", readyReason(got), got.Status.Rollout)
		}
		return ""
	})
	time.Sleep(2 * time.Second) // any write the reconciler would make
	for name, d := range deployments(t, kube, ns) {
		was := before[name]
		if d.Generation != was.Generation || d.Annotations[duck.BoundAnnotation] != was.Annotations[duck.BoundAnnotation] {
			t.Errorf("Deployment %s written by an edit that changes no template: generation %d (was %d), bound %q (was %q)",
				name, d.Generation, was.Generation, d.Annotations[duck.BoundAnnotation], was.Annotations[duck.BoundAnnotation])
		}
	}
	// A Deployment created now is admitted at the edit's generation.
	late := createdBound(t, kube, ns, "late", "https://sink.example.com/1")
	if gen, _ := duck.BoundGeneration(late.Annotations, boundBy(t, dyn, ns, "sink")); gen != 2 {
		t.Errorf("Deployment late records generation %d, want 2", gen)
	}
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// TestPlanOfRecordsOnlyThroughExampleBinary: three running Deployments
// already carry what a paused Binding, rolled out one at a time, would
// set (K_SINK at its value, set by hand before the Binding existed).
// kubectl bindkit plan counts three records-only subjects and no template
// change, and exits 0 (it exited 3: the controller's plan lists template
// changes only, and the plugin took the three for changes not shown);
// resumed, the three are recorded at the generation at once, their pod
// templates as they were.
func TestPlanOfRecordsOnlyThroughExampleBinary(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "records-")
	const sink = "https://sink.example.com/records"
	for _, name := range names("app", 3) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1",
						Env: []corev1.EnvVar{{Name: "K_SINK", Value: sink}}}}},
				},
			},
		}
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rollout.Poll(t, 3*time.Minute, "the 3 Deployments to roll out", func() string {
		n := 0
		for _, d := range deployments(t, kube, ns) {
			if rollout.RolledOut(t, d) {
				n++
			}
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d of 3 rolled out", n)}[n == 3]
	})
	before := deployments(t, kube, ns)
	rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, sink, "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "1", psbinding.RolloutPausedAnnotation: "true"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var view planView
	code := kubectlJSON(t, env, &view, "plan", "sinkbinding/sink", "-n", ns, "--timeout", "2m")
	wantCode(t, "plan -o json", code, exitOK)
	if p := view.Plan; p == nil || p.Bind != 3 || p.RecordsOnly != 3 || p.TemplateChanges != 0 || len(p.Waves) != 0 || len(p.Changes) != 0 {
		t.Errorf("plan %+v: want 3 to bind, all 3 records only, no wave, no template change", p)
	}
	out, code := kubectl(t, env, "plan", "sinkbinding/sink", "-n", ns)
	wantCode(t, "plan", code, exitOK)
	wantLines(t, "plan", out,
		"3 subjects selected: 3 to bind, 0 to unbind, 0 unchanged",
		"0 template changes, 3 records only",
		"no pod template changes: resuming writes bindkit's records only")

	out, code = kubectl(t, env, "rollout", "resume", "sinkbinding/sink", "-n", ns)
	wantCode(t, "rollout resume", code, exitOK)
	rollout.Poll(t, time.Minute, "generation 1 in force", func() string {
		got := getBinding(t, dyn, ns, "sink")
		if readyReason(got) != "Ready" || !got.Status.Rollout.Complete(got.Generation) {
			return fmt.Sprintf("Ready reason %q, rollout %+v", readyReason(got), got.Status.Rollout)
		}
		return ""
	})
	by := boundBy(t, dyn, ns, "sink")
	for name, d := range deployments(t, kube, ns) {
		if gen, _ := duck.BoundGeneration(d.Annotations, by); gen != 1 {
			t.Errorf("Deployment %s records generation %d, want 1: %q", name, gen, d.Annotations[duck.BoundAnnotation])
		}
		if !equality.Semantic.DeepEqual(d.Spec.Template, before[name].Spec.Template) {
			t.Errorf("Deployment %s: pod template changed by a records-only rollout:\nbefore %+v\nafter  %+v", name, before[name].Spec.Template, d.Spec.Template)
		}
	}
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}
