package psbinding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

var workloadsGVR = schema.GroupVersionResource{Group: "test.bindkit.dev", Version: "v1", Resource: "workloads"}

func (h *harness) createBinding(t *testing.T, name string, subject tracker.Reference, envName, value string) {
	t.Helper()
	b := newEnvBinding(h.ns, name, subject, envName, value)
	if _, err := h.dyn.Resource(envBindingsGVR).Namespace(h.ns).Create(context.Background(), toUnstructured(t, b), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create binding %s: %v", name, err)
	}
}

func (h *harness) binding(t *testing.T, name string) (*envBinding, error) {
	t.Helper()
	u, err := h.dyn.Resource(envBindingsGVR).Namespace(h.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return toEnvBinding(u)
}

// waitReady waits until the Binding's Ready condition has status and
// reason for its current generation.
func (h *harness) waitReady(t *testing.T, name string, want readyCondition) *envBinding {
	t.Helper()
	var b *envBinding
	eventually(t, "binding "+name+" condition", func() (string, error) {
		var err error
		if b, err = h.binding(t, name); err != nil {
			return "", err
		}
		if got := ready(b); got != want || b.Status.ObservedGeneration != b.Generation {
			return fmt.Sprintf("Ready %+v at observed generation %d of %d", got, b.Status.ObservedGeneration, b.Generation), nil
		}
		return "", nil
	})
	return b
}

// deleteBinding deletes the Binding; waitDeleted waits until the reconciler
// has released it and it is gone.
func (h *harness) deleteBinding(t *testing.T, name string) {
	t.Helper()
	if err := h.dyn.Resource(envBindingsGVR).Namespace(h.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete binding %s: %v", name, err)
	}
}

func (h *harness) waitDeleted(t *testing.T, name string) {
	t.Helper()
	eventually(t, "binding "+name+" gone", func() (string, error) {
		if _, err := h.binding(t, name); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("get: %v", err), nil
		}
		return "", nil
	})
}

func (h *harness) createDeployment(t *testing.T, name string, labels map[string]string) *appsv1.Deployment {
	t.Helper()
	d := testDeployment(h.ns, name, labels)
	d.ResourceVersion = ""
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}}
	d.Spec.Template.Labels = map[string]string{"pod": name}
	created, err := h.kube.AppsV1().Deployments(h.ns).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment %s: %v", name, err)
	}
	return created
}

func (h *harness) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d, err := h.kube.AppsV1().Deployments(h.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment %s: %v", name, err)
	}
	return d
}

func envOf(spec *corev1.PodSpec) []corev1.EnvVar { return spec.Containers[0].Env }

func (h *harness) waitDeploymentEnv(t *testing.T, name string, want []corev1.EnvVar) {
	t.Helper()
	eventually(t, "deployment "+name+" env", func() (string, error) {
		if diff := cmp.Diff(want, envOf(&h.deployment(t, name).Spec.Template.Spec), cmpopts.EquateEmpty()); diff != "" {
			return diff, nil
		}
		return "", nil
	})
}

// waitAdmission waits until the kube-apiserver calls the webhook for
// creates of resource: the admission controller has written the rule and
// the CA bundle, and the kube-apiserver has loaded the configuration.
func (h *harness) waitAdmission(t *testing.T, probe func() (bool, error)) {
	t.Helper()
	eventually(t, "webhook in force", func() (string, error) {
		ok, err := probe()
		if err != nil || !ok {
			return "dry-run create not mutated yet", err
		}
		return "", nil
	})
}

func (h *harness) deploymentProbe(name string, bound corev1.EnvVar) func() (bool, error) {
	return func() (bool, error) {
		d := testDeployment(h.ns, name, map[string]string{"app": "web"})
		d.ResourceVersion = ""
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}}
		d.Spec.Template.Labels = map[string]string{"pod": name}
		got, err := h.kube.AppsV1().Deployments(h.ns).Create(context.Background(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return slices.Contains(envOf(&got.Spec.Template.Spec), bound), nil
	}
}

var token = corev1.EnvVar{Name: "TOKEN", Value: "t"}

// Scenario 1: a Binding created after its subject patches it through the
// reconciler, and becomes Ready at its generation.
func TestBindingAfterSubjectWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	h.createDeployment(t, "web", nil)
	h.createBinding(t, "gh", deploymentRef(h.ns, "web", nil), "TOKEN", "t")
	h.waitDeploymentEnv(t, "web", []corev1.EnvVar{token})
	b := h.waitReady(t, "gh", readyCondition{"True", duck.ReasonBindingAvailable})
	if diff := cmp.Diff([]string{"test.bindkit.dev/envbindings"}, b.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
}

// Scenario 2: a subject created after the Binding is bound at admission;
// the reconciler then finds nothing to change (the generation stays 1).
func TestSubjectAfterBindingIsBoundAtAdmissionWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	h.createBinding(t, "gh", deploymentRef(h.ns, "web", nil), "TOKEN", "t")
	h.waitReady(t, "gh", readyCondition{"True", duck.ReasonBindingAvailable})
	h.waitAdmission(t, h.deploymentProbe("web", token))

	created := h.createDeployment(t, "web", nil)
	if diff := cmp.Diff([]corev1.EnvVar{token}, envOf(&created.Spec.Template.Spec)); diff != "" {
		t.Fatalf("created deployment env (-want +got):\n%s", diff)
	}
	time.Sleep(2 * time.Second) // room for a reconcile that should not write
	if got := h.deployment(t, "web"); got.Generation != 1 {
		t.Errorf("deployment generation = %d after admission binding, want 1 (the reconciler rewrote it)", got.Generation)
	}
}

// Scenario 3: a selector Binding binds every match, a subject added later
// at admission, and unbinds a subject relabelled out of the selection.
func TestSelectorBindingWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	web := map[string]string{"app": "web"}
	h.createDeployment(t, "web-1", web)
	h.createDeployment(t, "web-2", web)
	h.createDeployment(t, "db", map[string]string{"app": "db"})
	h.createBinding(t, "gh", deploymentRef(h.ns, "", &metav1.LabelSelector{MatchLabels: web}), "TOKEN", "t")
	h.waitDeploymentEnv(t, "web-1", []corev1.EnvVar{token})
	h.waitDeploymentEnv(t, "web-2", []corev1.EnvVar{token})
	h.waitReady(t, "gh", readyCondition{"True", duck.ReasonBindingAvailable})

	h.waitAdmission(t, h.deploymentProbe("web-3", token))
	created := h.createDeployment(t, "web-3", web)
	if diff := cmp.Diff([]corev1.EnvVar{token}, envOf(&created.Spec.Template.Spec)); diff != "" {
		t.Errorf("web-3 created (-want +got):\n%s", diff)
	}

	relabel := h.deployment(t, "web-1")
	relabel.Labels = map[string]string{"app": "retired"}
	if _, err := h.kube.AppsV1().Deployments(h.ns).Update(context.Background(), relabel, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("relabel web-1: %v", err)
	}
	h.waitDeploymentEnv(t, "web-1", nil)
	if env := envOf(&h.deployment(t, "db").Spec.Template.Spec); len(env) != 0 {
		t.Errorf("db was touched: env %v", env)
	}
}

// Scenario 4: deleting the Binding unbinds its subject, then the finalizer
// goes and so does the Binding.
func TestBindingDeletionWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	h.createDeployment(t, "web", nil)
	h.createBinding(t, "gh", deploymentRef(h.ns, "web", nil), "TOKEN", "t")
	h.waitDeploymentEnv(t, "web", []corev1.EnvVar{token})
	h.waitReady(t, "gh", readyCondition{"True", duck.ReasonBindingAvailable})

	h.deleteBinding(t, "gh")
	h.waitDeploymentEnv(t, "web", nil)
	h.waitDeleted(t, "gh")
}

// Scenario 5: two Bindings on one subject settle: the subject's generation
// stops changing, so webhook and reconciler do not fight.
func TestTwoBindingsOneSubjectSettleWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	h.createDeployment(t, "web", nil)
	h.createBinding(t, "a", deploymentRef(h.ns, "web", nil), "A", "1")
	h.createBinding(t, "b", deploymentRef(h.ns, "web", nil), "B", "2")
	want := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	eventually(t, "both bound", func() (string, error) {
		got := envOf(&h.deployment(t, "web").Spec.Template.Spec)
		if !slices.Contains(got, want[0]) || !slices.Contains(got, want[1]) || len(got) != 2 {
			return fmt.Sprint(got), nil
		}
		return "", nil
	})
	h.waitReady(t, "a", readyCondition{"True", duck.ReasonBindingAvailable})
	h.waitReady(t, "b", readyCondition{"True", duck.ReasonBindingAvailable})
	before := h.deployment(t, "web").Generation
	time.Sleep(3 * time.Second)
	if after := h.deployment(t, "web").Generation; after != before {
		t.Errorf("subject generation moved from %d to %d with nothing changing: a loop", before, after)
	}
}

// Scenario 6: a CronJob is patched through its job template; a bare Pod is
// bound at admission only, and its Binding says so.
func TestCronJobAndPodSubjectsWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "job", Image: "job"}}}},
		}}},
	}
	if _, err := h.kube.BatchV1().CronJobs(h.ns).Create(context.Background(), cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.createBinding(t, "cron", tracker.Reference{APIVersion: "batch/v1", Kind: "CronJob", Namespace: h.ns, Name: "nightly"}, "TOKEN", "t")
	h.createBinding(t, "pod", tracker.Reference{APIVersion: "v1", Kind: "Pod", Namespace: h.ns, Name: "single"}, "TOKEN", "t")
	eventually(t, "cronjob bound", func() (string, error) {
		got, err := h.kube.BatchV1().CronJobs(h.ns).Get(context.Background(), "nightly", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if env := envOf(&got.Spec.JobTemplate.Spec.Template.Spec); !slices.Contains(env, token) {
			return fmt.Sprint(env), nil
		}
		return "", nil
	})
	h.waitReady(t, "pod", readyCondition{"False", ReasonBoundAtAdmissionOnly})

	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "single"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	h.waitAdmission(t, func() (bool, error) {
		got, err := h.kube.CoreV1().Pods(h.ns).Create(context.Background(), pod(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && slices.Contains(envOf(&got.Spec), token), err
	})
	created, err := h.kube.CoreV1().Pods(h.ns).Create(context.Background(), pod(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1.EnvVar{token}, envOf(&created.Spec)); diff != "" {
		t.Errorf("pod env (-want +got):\n%s", diff)
	}
}

// Scenario 7: status and scale updates go through untouched, and the rules
// name no subresource.
func TestSubresourcesAreNotMutatedWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	h.createDeployment(t, "web", nil)
	h.createBinding(t, "gh", deploymentRef(h.ns, "web", nil), "TOKEN", "t")
	h.waitDeploymentEnv(t, "web", []corev1.EnvVar{token})

	var cfg *admissionregistrationv1.MutatingWebhookConfiguration
	eventually(t, "rules programmed", func() (string, error) {
		var err error
		cfg, err = h.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), h.webhook, metav1.GetOptions{})
		if err != nil || len(cfg.Webhooks[0].Rules) == 0 {
			return "no rules yet", err
		}
		return "", nil
	})
	for _, r := range cfg.Webhooks[0].Rules {
		for _, res := range r.Resources {
			if strings.Contains(res, "/") {
				t.Errorf("rule names subresource %q", res)
			}
		}
	}

	before := h.deployment(t, "web")
	if _, err := h.kube.AppsV1().Deployments(h.ns).UpdateScale(context.Background(), "web",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "web", ResourceVersion: before.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}},
		metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	scaled := h.deployment(t, "web")
	scaled.Status.ObservedGeneration = scaled.Generation
	if _, err := h.kube.AppsV1().Deployments(h.ns).UpdateStatus(context.Background(), scaled, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update: %v", err)
	}
	after := h.deployment(t, "web")
	if diff := cmp.Diff(before.Spec.Template, after.Spec.Template); diff != "" {
		t.Errorf("template changed by scale/status updates (-before +after):\n%s", diff)
	}
	if *after.Spec.Replicas != 3 {
		t.Errorf("replicas = %d, want 3", *after.Spec.Replicas)
	}
}

// Scenario 8: a Binding whose subject kind does not exist says so and can
// still be deleted.
func TestBindingToMissingKindWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	h.createBinding(t, "lost", tracker.Reference{APIVersion: "nowhere.example.com/v1", Kind: "Ghost", Namespace: h.ns, Name: "x"}, "TOKEN", "t")
	h.waitReady(t, "lost", readyCondition{"False", ReasonSubjectKindNotFound})
	h.deleteBinding(t, "lost")
	h.waitDeleted(t, "lost")
}

// Scenario 9: fields no duck type knows survive both the reconciler's and
// the webhook's patches of a CRD subject.
func TestUnknownFieldsSurviveWithRealAPIServer(t *testing.T) {
	h := startHarness(t)
	workload := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.bindkit.dev/v1", "kind": "Workload",
			"metadata": map[string]any{"namespace": h.ns, "name": name, "labels": map[string]any{"app": "w"}},
			"spec": map[string]any{
				"extra": map[string]any{"keep": "me", "list": []any{int64(1), int64(2)}},
				"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "app", "image": "app", "futureField": "kept"}},
				}},
			},
		}}
	}
	client := h.dyn.Resource(workloadsGVR).Namespace(h.ns)
	if _, err := client.Create(context.Background(), workload("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.createBinding(t, "gh", tracker.Reference{APIVersion: "test.bindkit.dev/v1", Kind: "Workload", Namespace: h.ns,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}}, "TOKEN", "t")

	check := func(u *unstructured.Unstructured) string {
		keep, _, _ := unstructured.NestedString(u.Object, "spec", "extra", "keep")
		list, _, _ := unstructured.NestedSlice(u.Object, "spec", "extra", "list")
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		c, _ := containers[0].(map[string]any)
		env, _ := c["env"].([]any)
		got := fmt.Sprintf("keep=%s list=%v future=%v env=%d", keep, list, c["futureField"], len(env))
		if want := "keep=me list=[1 2] future=kept env=1"; got != want {
			return got + ", want " + want
		}
		return ""
	}
	eventually(t, "reconciler patch keeps unknown fields", func() (string, error) {
		u, err := client.Get(context.Background(), "before", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return check(u), nil
	})
	h.waitAdmission(t, func() (bool, error) {
		got, err := client.Create(context.Background(), workload("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && check(got) == "", err
	})
	created, err := client.Create(context.Background(), workload("after"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if msg := check(created); msg != "" {
		t.Errorf("admission patch: %s", msg)
	}
}
