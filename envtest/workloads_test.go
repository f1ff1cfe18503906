package envtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/envtest"
)

// workloadPlane runs workloads: kube-scheduler and kwok's fake nodes beside
// the controllers. It starts only if a workload test runs.
var workloadPlane = envtest.Shared{Options: envtest.Options{Workloads: true}}

// workloadTimeout bounds how long a test waits for a workload to settle:
// controllers, scheduler and kwok each act within a second or so, but the
// machine may be busy.
const workloadTimeout = 2 * time.Minute

func podTemplate(name string, annotations map[string]string, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

func selector(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
}

// waitFor polls cond until it holds; on timeout it fails with what cond
// last reported.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) (string, bool)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, workloadTimeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		last, ok = cond(ctx)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last seen: %s", what, err, last)
	}
}

// TestWorkloadsRunPods creates one workload of each kind that keeps pods
// and checks that each one's status reports its pods Ready, which happens
// only if the controllers made the pods, the scheduler bound them to a fake
// node and kwok ran them.
func TestWorkloadsRunPods(t *testing.T) {
	env := workloadPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "workloads-")
	ctx := t.Context()
	replicas := int32(2)

	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector("web"), Template: podTemplate("web", nil, "nginx")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	if _, err := kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas, Selector: selector("db"), Template: podTemplate("db", nil, "postgres")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create statefulset: %v", err)
	}
	if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: selector("agent"), Template: podTemplate("agent", nil, "agent")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create daemonset: %v", err)
	}
	job := podTemplate("once", nil, "busybox")
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec:       batchv1.JobSpec{Template: job},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}

	waitFor(t, "deployment web available", func(ctx context.Context) (string, bool) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("%+v", d.Status), d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == replicas && d.Status.AvailableReplicas == replicas
	})
	waitFor(t, "statefulset db ready", func(ctx context.Context) (string, bool) {
		s, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("%+v", s.Status), s.Status.ReadyReplicas == replicas && s.Status.AvailableReplicas == replicas
	})
	waitFor(t, "daemonset agent ready on every node", func(ctx context.Context) (string, bool) {
		d, err := kube.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("%+v", d.Status), d.Status.DesiredNumberScheduled == 2 && d.Status.NumberReady == 2
	})
	waitFor(t, "job once succeeded", func(ctx context.Context) (string, bool) {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("%+v", j.Status), j.Status.Succeeded == 1 && j.Status.CompletionTime != nil
	})

	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			t.Errorf("pod %s: node %q phase %s IP %q, want scheduled, Running, with an IP", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
		}
	}
}

// TestWorkloadsFailOnPurpose checks both documented ways of making a pod
// fail: the pods run but never become Ready, their containers wait in
// CrashLoopBackOff, and a Deployment of them never becomes available.
func TestWorkloadsFailOnPurpose(t *testing.T) {
	env := workloadPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "fail-")
	ctx := t.Context()
	replicas := int32(1)

	tests := []struct {
		name     string
		template corev1.PodTemplateSpec
	}{
		{"annotation", podTemplate("annotation", map[string]string{envtest.FailPodAnnotation: "true"}, "nginx")},
		{"image", podTemplate("image", nil, envtest.FailingImage)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name},
				Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector(tc.name), Template: tc.template},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create deployment: %v", err)
			}
			var pod corev1.Pod
			waitFor(t, "pod running", func(ctx context.Context) (string, bool) {
				pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + tc.name})
				if err != nil || len(pods.Items) == 0 {
					return fmt.Sprint(err), false
				}
				pod = pods.Items[0]
				return fmt.Sprintf("%+v", pod.Status), pod.Status.Phase == corev1.PodRunning
			})
			var waiting []string
			for _, c := range pod.Status.ContainerStatuses {
				if c.State.Waiting != nil {
					waiting = append(waiting, c.State.Waiting.Reason)
				}
			}
			if diff := cmp.Diff([]string{"CrashLoopBackOff"}, waiting); diff != "" {
				t.Errorf("pod %s waiting reasons (-want +got):\n%s", pod.Name, diff)
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					t.Errorf("pod %s is Ready, want never Ready", pod.Name)
				}
			}
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get deployment: %v", err)
			}
			if d.Status.AvailableReplicas != 0 {
				t.Errorf("deployment %s: %d available replicas, want 0", tc.name, d.Status.AvailableReplicas)
			}
		})
	}
}
