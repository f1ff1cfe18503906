package rollout_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// controlPlane runs workloads (kube-scheduler, kwok nodes, the workload
// controllers) and serves the SinkBinding CRD.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads: true,
	CRDPaths:  []string{"../../examples/sinkbinding/config/300-sinkbinding.yaml"},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

var sinkBindings = v1alpha1.GroupVersionResource()

// startController builds and starts the sinkbinding example binary with
// its default flags, once per test.
func startController(t *testing.T, env *testenv.Environment) *demo.Controller {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(t.TempDir(), "sinkbinding-controller")
	if err := demo.BuildPackage(t.Context(), root, "./examples/sinkbinding/cmd/controller", binary); err != nil {
		t.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctrl.Stop(); err != nil {
			t.Errorf("stop controller: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", ctrl.LogTail(60))
		}
	})
	return ctrl
}

// createDeployments creates n one-replica Deployments app-000... in ns,
// labelled app=web and group=<i % groups>.
func createDeployments(t *testing.T, kube kubernetes.Interface, ns string, n, groups int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("app-%03d", i)
		labels := map[string]string{"app": "web", "group": fmt.Sprint(i % groups)}
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
		names = append(names, name)
	}
	return names
}

// sinkBinding is a SinkBinding of ns selecting labels, pointing at sink,
// with annotations (the rollout policy) and a forwarder image.
func sinkBinding(ns, name string, labels map[string]any, sink, forwarder string, annotations map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": labels}},
		"sink":    sink,
	}
	if forwarder != "" {
		spec["forwarderImage"] = forwarder
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sinkBindings.GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": annotations},
		"spec":     spec,
	}}
}

// sinkOf is the K_SINK of d's first container, "" if none.
func sinkOf(d *appsv1.Deployment) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == v1alpha1.SinkEnv {
			return e.Value
		}
	}
	return ""
}

// rolledOut reports whether d's current template is rolled out, from its
// status, as the reconciler reads it.
func rolledOut(t *testing.T, d *appsv1.Deployment) bool {
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

// ready returns the Binding's Ready condition.
func ready(t *testing.T, dyn dynamic.Interface, ns, name string) (*metav1.Condition, *duck.RolloutStatus) {
	t.Helper()
	u, err := dyn.Resource(sinkBindings).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
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

// describeDeployments says, for a failure message, which Deployments of
// ns carry a sink, which have rolled out and which are marked changing.
func describeDeployments(t *testing.T, kube kubernetes.Interface, ns string) string {
	list, err := kube.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for i := range list.Items {
		d := &list.Items[i]
		out = append(out, fmt.Sprintf("%s sink=%v rolledOut=%v containers=%d", d.Name, sinkOf(d) != "", rolledOut(t, d), len(d.Spec.Template.Spec.Containers)))
	}
	return strings.Join(out, "; ")
}

// poll calls check every 250ms until it returns "", for at most timeout.
func poll(t *testing.T, timeout time.Duration, what string, check func() string) {
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

// TestRolloutTenAtATime binds 100 Deployments with a selector Binding
// whose policy lets 10 change at a time: sampled every 100ms, never more
// than 10 carry the Binding without having rolled out, and all 100 carry
// it at the end, rolled out, the Binding Ready with its rollout status.
func TestRolloutTenAtATime(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-ten-")
	names := createDeployments(t, kube, ns, 100, 1)
	poll(t, 3*time.Minute, "the 100 Deployments to roll out", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		n := 0
		for i := range list.Items {
			if rolledOut(t, &list.Items[i]) {
				n++
			}
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d of 100 rolled out", n)}[n == 100]
	})
	startController(t, env)

	var (
		mu       sync.Mutex
		worst    int
		worstAt  string
		samples  int
		sampling = make(chan struct{})
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(sampling)
		for sampleCtx.Err() == nil {
			changing, names, err := changedNotRolledOut(sampleCtx, kube, ns)
			if err == nil {
				mu.Lock()
				if changing > worst {
					worstAt = strings.Join(names, " ")
				}
				worst, samples = max(worst, changing), samples+1
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	b := sinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/ten", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "10"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 5*time.Minute, "the Binding to be Ready, rolled out", func() string {
		c, ro := ready(t, dyn, ns, "sink")
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Ready %+v, rollout %+v", c, ro)
		}
		return ""
	})
	stopSampling()
	<-sampling
	mu.Lock()
	t.Logf("%d samples, at most %d Deployments changed and not rolled out at once", samples, worst)
	if worst > 10 {
		t.Errorf("%d Deployments were changed and not rolled out at once; the policy allows 10: %s", worst, worstAt)
	}
	if samples < 10 {
		t.Errorf("only %d samples: the rollout was not watched", samples)
	}
	mu.Unlock()
	_, ro := ready(t, dyn, ns, "sink")
	if ro == nil || ro.Updated != 100 || ro.Total != 100 || ro.Wave < 10 || len(ro.Changing) != 0 || len(ro.Halted) != 0 {
		t.Errorf("rollout status %+v, want 100 of 100 updated in at least 10 waves, none changing or halted", ro)
	}
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if d := &list.Items[i]; sinkOf(d) != "https://sink.example.com/ten" {
			t.Errorf("Deployment %s: K_SINK %q", d.Name, sinkOf(d))
		}
	}
	poll(t, time.Minute, "every pod to run the Binding's template", func() string {
		n, names, err := changedNotRolledOut(ctx, kube, ns)
		if err != nil {
			return err.Error()
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d not rolled out: %v", n, names)}[n == 0]
	})
	_ = names
}

// changedNotRolledOut counts the Deployments of ns whose template carries
// a sink but whose pods do not all run it yet, Ready: what the workloads
// show, whatever the Deployments' status says.
func changedNotRolledOut(ctx context.Context, kube kubernetes.Interface, ns string) (int, []string, error) {
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
		sink := sinkOf(d)
		if sink == "" {
			continue
		}
		ok := len(podsOf[d.Name]) > 0
		for _, p := range podsOf[d.Name] {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			hasSink := slices.ContainsFunc(p.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == v1alpha1.SinkEnv && e.Value == sink })
			ok = ok && ready && hasSink && p.DeletionTimestamp == nil
		}
		if !ok {
			names = append(names, fmt.Sprintf("%s(%d pods)", d.Name, len(podsOf[d.Name])))
		}
	}
	return len(names), names, nil
}

// TestRolloutHaltsRollsBackAndResumes gives 20 Deployments a Binding whose
// forwarder sidecar never becomes Ready, 5 at a time with a 15s deadline
// and rollback: the rollout halts after the first wave, the Binding names
// those subjects, they get their previous template back, the 15 others are
// never touched; the Binding fixed, the rollout completes.
func TestRolloutHaltsRollsBackAndResumes(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-halt-")
	createDeployments(t, kube, ns, 20, 1)
	generations := map[string]int64{}
	poll(t, 2*time.Minute, "the 20 Deployments to roll out", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			if !rolledOut(t, &list.Items[i]) {
				return list.Items[i].Name + " not rolled out"
			}
			generations[list.Items[i].Name] = list.Items[i].Generation
		}
		return ""
	})
	startController(t, env)
	b := sinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/halt", envtest.FailingImage,
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "5", psbinding.RolloutDeadlineAnnotation: "15s", psbinding.RolloutRollbackAnnotation: "true"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var halted []string
	poll(t, 2*time.Minute, "the rollout to halt", func() string {
		c, ro := ready(t, dyn, ns, "sink")
		if c == nil || c.Reason != psbinding.ReasonRolloutHalted || ro == nil {
			return fmt.Sprintf("Ready %+v, rollout %+v; %s", c, ro, describeDeployments(t, kube, ns))
		}
		halted = ro.Halted
		for _, name := range ro.Halted {
			if !strings.Contains(c.Message, name) {
				return fmt.Sprintf("condition %q does not name %s", c.Message, name)
			}
		}
		return ""
	})
	if want := []string{"app-000", "app-001", "app-002", "app-003", "app-004"}; !slices.Equal(halted, want) {
		t.Errorf("halted on %v, want the first wave %v", halted, want)
	}
	poll(t, time.Minute, "the first wave to be rolled back", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			d := &list.Items[i]
			if sinkOf(d) != "" || len(d.Spec.Template.Spec.Containers) != 1 || d.Annotations[duck.BoundAnnotation] != "" {
				return fmt.Sprintf("%s still bound: %d containers, K_SINK %q, bound %q", d.Name, len(d.Spec.Template.Spec.Containers), sinkOf(d), d.Annotations[duck.BoundAnnotation])
			}
		}
		return ""
	})
	// The 15 outside the first wave were never patched: same generation.
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		if !slices.Contains(halted, d.Name) && d.Generation != generations[d.Name] {
			t.Errorf("Deployment %s outside the halted wave changed: generation %d, was %d", d.Name, d.Generation, generations[d.Name])
		}
	}
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + psbinding.ReasonRolloutHalted})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no %s event (%v)", psbinding.ReasonRolloutHalted, err)
	}

	// Fixed: no forwarder. The rollout resumes from where it stands.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := dyn.Resource(sinkBindings).Namespace(ns).Get(ctx, "sink", metav1.GetOptions{})
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u.Object, "spec", "forwarderImage")
		_, err = dyn.Resource(sinkBindings).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the fixed Binding to roll out", func() string {
		c, ro := ready(t, dyn, ns, "sink")
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Ready %+v, rollout %+v", c, ro)
		}
		return ""
	})
	list, err = kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		if sinkOf(d) != "https://sink.example.com/halt" || len(d.Spec.Template.Spec.Containers) != 1 || d.Annotations[psbinding.HeldAnnotation] != "" {
			t.Errorf("Deployment %s after the fix: K_SINK %q, %d containers, held %q", d.Name, sinkOf(d), len(d.Spec.Template.Spec.Containers), d.Annotations[psbinding.HeldAnnotation])
		}
	}
	poll(t, time.Minute, "every pod to run the fixed template", func() string {
		n, names, err := changedNotRolledOut(ctx, kube, ns)
		if err != nil {
			return err.Error()
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d not rolled out: %v", n, names)}[n == 0]
	})
}

// TestRolloutCoalescesEdits makes 20 edits of a Binding's sink within 2
// seconds, once its 20 Deployments are bound: under a policy each
// Deployment's template changes at most twice (its generation grows by
// two at most), and all end with the last sink.
func TestRolloutCoalescesEdits(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-edits-")
	createDeployments(t, kube, ns, 20, 1)
	startController(t, env)
	b := sinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/0", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "10"})
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 3*time.Minute, "the Binding to roll out", func() string {
		if c, ro := ready(t, dyn, ns, "sink"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Ready %+v, rollout %+v", c, ro)
		}
		return ""
	})
	before := map[string]int64{}
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Items {
		before[d.Name] = d.Generation
	}
	start := time.Now()
	for i := 1; i <= 20; i++ {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := dyn.Resource(sinkBindings).Namespace(ns).Get(ctx, "sink", metav1.GetOptions{})
			if err != nil {
				return err
			}
			unstructured.SetNestedField(u.Object, fmt.Sprintf("https://sink.example.com/%d", i), "spec", "sink")
			_, err = dyn.Resource(sinkBindings).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
	}
	t.Logf("20 edits in %v", time.Since(start).Round(time.Millisecond))
	poll(t, 3*time.Minute, "the last edit to roll out everywhere", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			if d := &list.Items[i]; sinkOf(d) != "https://sink.example.com/20" || !rolledOut(t, d) {
				return fmt.Sprintf("%s: K_SINK %q", d.Name, sinkOf(d))
			}
		}
		if c, _ := ready(t, dyn, ns, "sink"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Ready %+v", c)
		}
		return ""
	})
	list, err = kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	worst := int64(0)
	for _, d := range list.Items {
		patches := d.Generation - before[d.Name]
		worst = max(worst, patches)
		if patches > 2 {
			t.Errorf("Deployment %s: %d template changes for 20 edits, want at most 2", d.Name, patches)
		}
	}
	t.Logf("at most %d template changes per Deployment for 20 edits", worst)
}

// TestWithoutPolicyConvergesAsBefore binds 200 Deployments with 20
// overlapping selector Bindings and no policy: every Deployment carries
// every Binding that selects it, as fast as before (the time is logged;
// targets are benchmarks' business).
func TestWithoutPolicyConvergesAsBefore(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-none-")
	createDeployments(t, kube, ns, 200, 10)
	startController(t, env)
	start := time.Now()
	// Ten Bindings select a group each; ten more select every Deployment
	// (app=web), so each Deployment is selected by eleven.
	for i := range 20 {
		labels := map[string]any{"group": fmt.Sprint(i)}
		if i >= 10 {
			labels = map[string]any{"app": "web"}
		}
		b := sinkBinding(ns, fmt.Sprintf("sink-%02d", i), labels, fmt.Sprintf("https://sink.example.com/%d", i), "", nil)
		if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 2*time.Minute, "every Deployment to carry the 11 Bindings selecting it", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, d := range list.Items {
			if n := len(duck.BoundOf(d.Annotations)); n != 11 {
				return fmt.Sprintf("%s records %d Bindings", d.Name, n)
			}
		}
		return ""
	})
	t.Logf("200 Deployments, 20 overlapping Bindings, no policy: converged in %v", time.Since(start).Round(time.Millisecond))
}
