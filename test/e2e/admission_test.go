package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/demo"
)

// newNamespaceWithSecret makes a namespace for one test with the Secret a
// GithubBinding names.
func newNamespaceWithSecret(t *testing.T, kube kubernetes.Interface, create func(testing.TB, string) string) string {
	t.Helper()
	ns := create(t, "e2e-")
	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-token"},
		StringData: map[string]string{"token": "not-a-real-token"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	return ns
}

func createBinding(t *testing.T, dyn dynamic.Interface, ns string, subject map[string]any) {
	t.Helper()
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": githubBindings.GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"name": "gh"},
		"spec":     map[string]any{"subject": subject, "secret": map[string]any{"name": "github-token"}},
	}}
	if _, err := dyn.Resource(githubBindings).Namespace(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GithubBinding: %v", err)
	}
}

// poll waits for cond, failing with its last report.
func poll(t *testing.T, what string, cond func(ctx context.Context) string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last: %s", what, err, last)
	}
}

// TestBarePodsBoundAtAdmission binds Pods by label: a Pod created by hand
// and the pod of a Job (created by kube-controller-manager's Job
// controller) are bound by the webhook as they are created, and run bound.
func TestBarePodsBoundAtAdmission(t *testing.T) {
	env := controlPlane.Env(t)
	startController(t, env)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	ns := newNamespaceWithSecret(t, kube, env.CreateNamespace)
	createBinding(t, dyn, ns, map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"selector": map[string]any{"matchLabels": map[string]any{"bind": "yes"}},
	})
	// The kube-apiserver calls the webhook once the controller has added
	// the rule for Pods; a dry-run create shows when that is.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Labels: map[string]string{"bind": "yes"}},
		Spec:       template("by-hand").Spec,
	}
	poll(t, "webhook binds Pods", func(ctx context.Context) string {
		got, err := kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error()
		}
		if !demo.Bound(&got.Spec) {
			return "dry-run create not bound yet"
		}
		return ""
	})

	if _, err := kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	jobTemplate := template("job")
	jobTemplate.Labels["bind"] = "yes"
	jobTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job"},
		Spec:       batchv1.JobSpec{Template: jobTemplate},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	unboundPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-selected", Labels: map[string]string{"bind": "no"}},
		Spec:       template("not-selected").Spec,
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, unboundPod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}

	poll(t, "pod by-hand Running, Ready and bound", func(ctx context.Context) string {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "by-hand", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !podReady(p) || !demo.Bound(&p.Spec) {
			return fmt.Sprintf("ready=%v bound=%v", podReady(p), demo.Bound(&p.Spec))
		}
		return ""
	})
	poll(t, "job's pod bound and the job succeeded", func(ctx context.Context) string {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if j.Status.Succeeded != 1 {
			return fmt.Sprintf("job status %+v", j.Status)
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=job"})
		if err != nil || len(pods.Items) != 1 {
			return fmt.Sprintf("pods of the job: %v", err)
		}
		if p := pods.Items[0]; !demo.Bound(&p.Spec) || p.Status.Phase != corev1.PodSucceeded {
			return fmt.Sprintf("pod %s: bound=%v phase %s", p.Name, demo.Bound(&p.Spec), p.Status.Phase)
		}
		if demo.Bound(&j.Spec.Template.Spec) {
			return "the Job's template is bound: the Binding names Pods, not Jobs"
		}
		return ""
	})
	p, err := kube.CoreV1().Pods(ns).Get(ctx, "not-selected", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !unbound(&p.Spec) {
		t.Errorf("pod not-selected (label bind=no) was bound")
	}
	auditNamespace(t, env, ns)
}

// TestCronJobRunsBoundPods binds a CronJob through the reconciler and waits
// for the Job it starts next (within a minute: the schedule is every
// minute) to run a bound pod.
func TestCronJobRunsBoundPods(t *testing.T) {
	env := controlPlane.Env(t)
	startController(t, env)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	ns := newNamespaceWithSecret(t, kube, env.CreateNamespace)
	podTemplate := template("cron")
	podTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := kube.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cron"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cronjob: %v", err)
	}
	createBinding(t, dyn, ns, map[string]any{"apiVersion": "batch/v1", "kind": "CronJob", "name": "cron"})
	var template corev1.PodSpec
	poll(t, "cronjob bound", func(ctx context.Context) string {
		c, err := kube.BatchV1().CronJobs(ns).Get(ctx, "cron", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		template = c.Spec.JobTemplate.Spec.Template.Spec
		if !demo.Bound(&template) {
			return "template not bound yet"
		}
		return ""
	})
	poll(t, "a bound pod of the cronjob succeeded", func(ctx context.Context) string {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cron"})
		if err != nil {
			return err.Error()
		}
		for _, p := range pods.Items {
			if demo.Bound(&p.Spec) && p.Status.Phase == corev1.PodSucceeded {
				if d := drift(template, p.Spec); d != "" {
					return fmt.Sprintf("pod %s differs from the template (-template +pod):\n%s", p.Name, d)
				}
				return ""
			}
		}
		return fmt.Sprintf("%d pods, none bound and Succeeded", len(pods.Items))
	})
	auditNamespace(t, env, ns)
}
