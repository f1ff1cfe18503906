// Package rollout holds the rig of the rollout tests: the sinkbinding
// example binary run as users run it, Deployments that run pods on kwok
// nodes, SinkBindings with rollout policies, and what the tests read of
// them. Its tests (rollout_test.go) and the rollout fault tests
// (test/faults/rollout) use it. It is a test rig, not API.
package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// SinkBindings is the SinkBindings' resource.
var SinkBindings = v1alpha1.GroupVersionResource()

// RepoRoot is the repository's root, relative to the test's package
// directory; a package deeper than two levels sets it before the first
// StartController.
var RepoRoot = "../.."

// StartController starts the sinkbinding example binary (built once per
// test process, from RepoRoot) against env as users run it, with its
// default flags and args after them; it is stopped (or, killed already,
// left) at t's cleanup, and its log shown when t failed.
func StartController(t testing.TB, env *testenv.Environment, args ...string) *demo.Controller {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binary, err := demo.BuiltFor(env, RepoRoot, "./examples/sinkbinding/cmd/controller", "sinkbinding-controller")
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if exited, _ := ctrl.Exited(); !exited {
			if err := ctrl.Stop(); err != nil {
				t.Errorf("stop controller: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", ctrl.LogTail(60))
		}
	})
	return ctrl
}

// CreateDeployments creates n one-replica Deployments app-000... in ns,
// labelled app=web and group=<i % groups>.
func CreateDeployments(t testing.TB, kube kubernetes.Interface, ns string, n, groups int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("app-%03d", i)
		CreateDeployment(t, kube, ns, name, map[string]string{"app": "web", "group": fmt.Sprint(i % groups)})
		names = append(names, name)
	}
	return names
}

// CreateDeployment creates a one-replica Deployment ns/name labelled
// labels, whose pod runs one container.
func CreateDeployment(t testing.TB, kube kubernetes.Interface, ns, name string, labels map[string]string) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// SinkBinding is a SinkBinding of ns selecting labels, pointing at sink,
// with annotations (the rollout policy) and a forwarder image.
func SinkBinding(ns, name string, labels map[string]any, sink, forwarder string, annotations map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": labels}},
		"sink":    sink,
	}
	if forwarder != "" {
		spec["forwarderImage"] = forwarder
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": SinkBindings.GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": annotations},
		"spec":     spec,
	}}
}

// SinkOf is the K_SINK of d's first container, "" if none.
func SinkOf(d *appsv1.Deployment) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == v1alpha1.SinkEnv {
			return e.Value
		}
	}
	return ""
}

// RolledOut reports whether d's current template is rolled out, from its
// status, as the reconciler reads it.
func RolledOut(t testing.TB, d *appsv1.Deployment) bool {
	t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	done, _ := psbinding.RolledOut(u)
	return done
}

// Ready returns the Binding's Ready condition.
func Ready(t testing.TB, dyn dynamic.Interface, ns, name string) (*metav1.Condition, *duck.RolloutStatus) {
	t.Helper()
	u, err := dyn.Resource(SinkBindings).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b v1alpha1.SinkBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
		t.Fatal(err)
	}
	c := b.Status.GetCondition(duck.ConditionReady)
	if c == nil || b.Status.ObservedGeneration != b.Generation {
		return nil, b.Status.Rollout
	}
	return c, b.Status.Rollout
}

// DescribeDeployments says, for a failure message, which Deployments of
// ns carry a sink, which have rolled out and which are marked changing.
func DescribeDeployments(t testing.TB, kube kubernetes.Interface, ns string) string {
	list, err := kube.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for i := range list.Items {
		d := &list.Items[i]
		out = append(out, fmt.Sprintf("%s sink=%v rolledOut=%v containers=%d", d.Name, SinkOf(d) != "", RolledOut(t, d), len(d.Spec.Template.Spec.Containers)))
	}
	return strings.Join(out, "; ")
}

// Poll calls check every 250ms until it returns "", for at most timeout.
func Poll(t testing.TB, timeout time.Duration, what string, check func() string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

// ChangedNotRolledOut counts the Deployments of ns whose template carries
// a sink but whose pods do not all run it yet, Ready: what the workloads
// show, whatever the Deployments' status says.
func ChangedNotRolledOut(ctx context.Context, kube kubernetes.Interface, ns string) (int, []string, error) {
	return podsBehind(ctx, kube, ns, func(d *appsv1.Deployment) bool { return SinkOf(d) != "" })
}

// TemplateNotRolledOut counts the Deployments of ns whose pods do not all
// run their template's sink, or its lack of one, Ready: those whose pod
// template is changing, bound or unbound. An update of a Deployment's
// annotations alone (its generation counts those too, but no pod changes)
// is not a change.
func TemplateNotRolledOut(ctx context.Context, kube kubernetes.Interface, ns string) (int, []string, error) {
	return podsBehind(ctx, kube, ns, func(*appsv1.Deployment) bool { return true })
}

// podsBehind counts the Deployments of ns that count says to look at and
// whose pods do not all run their template's sink, Ready.
func podsBehind(ctx context.Context, kube kubernetes.Interface, ns string, count func(*appsv1.Deployment) bool) (int, []string, error) {
	deployments, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	podsOf := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		podsOf[p.Labels["name"]] = append(podsOf[p.Labels["name"]], p)
	}
	var names []string
	for i := range deployments.Items {
		d := &deployments.Items[i]
		if !count(d) {
			continue
		}
		sink := SinkOf(d)
		ok := len(podsOf[d.Name]) > 0
		for _, p := range podsOf[d.Name] {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			i := slices.IndexFunc(p.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == v1alpha1.SinkEnv })
			runs := (sink == "" && i < 0) || (i >= 0 && p.Spec.Containers[0].Env[i].Value == sink)
			ok = ok && ready && runs && p.DeletionTimestamp == nil
		}
		if !ok {
			names = append(names, fmt.Sprintf("%s(%d pods)", d.Name, len(podsOf[d.Name])))
		}
	}
	return len(names), names, nil
}
