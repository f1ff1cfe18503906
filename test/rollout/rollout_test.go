package rollout_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
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
	names := rollout.CreateDeployments(t, kube, ns, 100, 1)
	rollout.Poll(t, 3*time.Minute, "the 100 Deployments to roll out", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		n := 0
		for i := range list.Items {
			if rollout.RolledOut(t, &list.Items[i]) {
				n++
			}
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d of 100 rolled out", n)}[n == 100]
	})
	rollout.StartController(t, env)

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
			changing, names, err := rollout.ChangedNotRolledOut(sampleCtx, kube, ns)
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
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/ten", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "10"})
	if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, 5*time.Minute, "the Binding to be Ready, rolled out", func() string {
		c, ro := rollout.Ready(t, dyn, ns, "sink")
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
	_, ro := rollout.Ready(t, dyn, ns, "sink")
	if ro == nil || ro.Updated != 100 || ro.Total != 100 || ro.Wave < 10 || len(ro.Changing) != 0 || len(ro.Halted) != 0 {
		t.Errorf("rollout status %+v, want 100 of 100 updated in at least 10 waves, none changing or halted", ro)
	}
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if d := &list.Items[i]; rollout.SinkOf(d) != "https://sink.example.com/ten" {
			t.Errorf("Deployment %s: K_SINK %q", d.Name, rollout.SinkOf(d))
		}
	}
	rollout.Poll(t, time.Minute, "every pod to run the Binding's template", func() string {
		n, names, err := rollout.ChangedNotRolledOut(ctx, kube, ns)
		if err != nil {
			return err.Error()
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d not rolled out: %v", n, names)}[n == 0]
	})
	_ = names
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
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
	rollout.CreateDeployments(t, kube, ns, 20, 1)
	generations := map[string]int64{}
	rollout.Poll(t, 2*time.Minute, "the 20 Deployments to roll out", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			if !rollout.RolledOut(t, &list.Items[i]) {
				return list.Items[i].Name + " not rolled out"
			}
			generations[list.Items[i].Name] = list.Items[i].Generation
		}
		return ""
	})
	rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/halt", envtest.FailingImage,
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "5", psbinding.RolloutDeadlineAnnotation: "15s", psbinding.RolloutRollbackAnnotation: "true"})
	if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var halted []string
	rollout.Poll(t, 2*time.Minute, "the rollout to halt", func() string {
		c, ro := rollout.Ready(t, dyn, ns, "sink")
		if c == nil || c.Reason != psbinding.ReasonRolloutHalted || ro == nil {
			return fmt.Sprintf("Ready %+v, rollout %+v; %s", c, ro, rollout.DescribeDeployments(t, kube, ns))
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
	rollout.Poll(t, time.Minute, "the first wave to be rolled back", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			d := &list.Items[i]
			if rollout.SinkOf(d) != "" || len(d.Spec.Template.Spec.Containers) != 1 || d.Annotations[duck.BoundAnnotation] != "" {
				return fmt.Sprintf("%s still bound: %d containers, K_SINK %q, bound %q", d.Name, len(d.Spec.Template.Spec.Containers), rollout.SinkOf(d), d.Annotations[duck.BoundAnnotation])
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

	// A halt protects new subjects: one created while halted gets nothing
	// of the Binding, and waits in the status.
	const late = "late"
	rollout.CreateDeployment(t, kube, ns, late, map[string]string{"app": "web"})
	rollout.Poll(t, time.Minute, "the Deployment created while halted to wait in the status", func() string {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, late, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if rollout.SinkOf(d) != "" || len(d.Spec.Template.Spec.Containers) != 1 || d.Annotations[duck.BoundAnnotation] != "" {
			t.Fatalf("Deployment %s created while the rollout was halted got the halted generation: bound %q", late, d.Annotations[duck.BoundAnnotation])
		}
		if _, ro := rollout.Ready(t, dyn, ns, "sink"); ro == nil || !slices.Contains(ro.Waiting, late) {
			return fmt.Sprintf("rollout %+v does not list %s as waiting", ro, late)
		}
		return ""
	})

	// Fixed: no forwarder. The rollout resumes from where it stands.
	// A merge patch: the controller's status writes cannot make it conflict.
	if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Patch(ctx, "sink", types.MergePatchType, []byte(`{"spec":{"forwarderImage":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, 3*time.Minute, "the fixed Binding to roll out", func() string {
		c, ro := rollout.Ready(t, dyn, ns, "sink")
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
		if rollout.SinkOf(d) != "https://sink.example.com/halt" || len(d.Spec.Template.Spec.Containers) != 1 || d.Annotations[psbinding.HeldAnnotation] != "" {
			t.Errorf("Deployment %s after the fix: K_SINK %q, %d containers, held %q", d.Name, rollout.SinkOf(d), len(d.Spec.Template.Spec.Containers), d.Annotations[psbinding.HeldAnnotation])
		}
	}
	rollout.Poll(t, time.Minute, "every pod to run the fixed template", func() string {
		n, names, err := rollout.ChangedNotRolledOut(ctx, kube, ns)
		if err != nil {
			return err.Error()
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d not rolled out: %v", n, names)}[n == 0]
	})
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// TestRolloutCoalescesEdits makes 20 edits of a Binding's sink within 2
// seconds, once its Deployments are bound, under a policy (20 Deployments,
// 10 at a time) and without one (50 Deployments): each Deployment's
// template changes at most twice (its generation grows by two at most),
// and all end with the last sink.
func TestRolloutCoalescesEdits(t *testing.T) {
	t.Run("policy", func(t *testing.T) { coalesces(t, 20, map[string]any{psbinding.RolloutMaxChangingAnnotation: "10"}) })
	t.Run("no policy", func(t *testing.T) { coalesces(t, 50, nil) })
}

func coalesces(t *testing.T, deployments int, annotations map[string]any) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-edits-")
	rollout.CreateDeployments(t, kube, ns, deployments, 1)
	rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/0", "", annotations)
	if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, 3*time.Minute, "the Binding to roll out", func() string {
		if c, ro := rollout.Ready(t, dyn, ns, "sink"); c == nil || c.Status != metav1.ConditionTrue {
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
		edit := fmt.Sprintf(`{"spec":{"sink":"https://sink.example.com/%d"}}`, i)
		if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Patch(ctx, "sink", types.MergePatchType, []byte(edit), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
	}
	t.Logf("20 edits in %v", time.Since(start).Round(time.Millisecond))
	rollout.Poll(t, 3*time.Minute, "the last edit to roll out everywhere", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			if d := &list.Items[i]; rollout.SinkOf(d) != "https://sink.example.com/20" || !rollout.RolledOut(t, d) {
				return fmt.Sprintf("%s: K_SINK %q", d.Name, rollout.SinkOf(d))
			}
		}
		if c, _ := rollout.Ready(t, dyn, ns, "sink"); c == nil || c.Status != metav1.ConditionTrue {
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
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
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
	rollout.CreateDeployments(t, kube, ns, 200, 10)
	ctrl := rollout.StartController(t, env)
	start := time.Now()
	// Ten Bindings select a group each; ten more select every Deployment
	// (app=web), so each Deployment is selected by eleven.
	for i := range 20 {
		labels := map[string]any{"group": fmt.Sprint(i)}
		if i >= 10 {
			labels = map[string]any{"app": "web"}
		}
		b := rollout.SinkBinding(ns, fmt.Sprintf("sink-%02d", i), labels, fmt.Sprintf("https://sink.example.com/%d", i), "", nil)
		if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rollout.Poll(t, 2*time.Minute, "every Deployment to carry the 11 Bindings selecting it", func() string {
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
	took := time.Since(start).Round(time.Millisecond)
	m, err := ctrl.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("200 Deployments, 20 overlapping Bindings, no policy: converged in %v (%.0f subject patches, %.0f conflicts, %.0f reconciles, %.0f retries)", took,
		m.Sum("bindkit_subject_patches_total", nil), m.Sum("bindkit_subject_patch_conflicts_total", nil),
		m.Sum("bindkit_reconcile_total", map[string]string{"controller": "sinkbindings"}), m.Sum("bindkit_workqueue_retries_total", map[string]string{"controller": "sinkbindings"}))
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// TestPacedDeletion deletes a Binding whose policy paces deletion, over
// 12 Deployments 3 at a time: the Binding stays until the last wave has
// rolled out, never more than 3 Deployments at once run pods not of their
// template, and every Deployment ends unbound with no record left.
func TestPacedDeletion(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-delete-")
	rollout.CreateDeployments(t, kube, ns, 12, 1)
	rollout.StartController(t, env)
	b := rollout.SinkBinding(ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/del", "",
		map[string]any{psbinding.RolloutMaxChangingAnnotation: "3", psbinding.RolloutPaceDeletionAnnotation: "true"})
	if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, 3*time.Minute, "the Binding to roll out", func() string {
		if c, ro := rollout.Ready(t, dyn, ns, "sink"); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("Ready %+v, rollout %+v", c, ro)
		}
		if n, names, err := rollout.ChangedNotRolledOut(ctx, kube, ns); err != nil || n > 0 {
			return fmt.Sprintf("%d not rolled out: %v (%v)", n, names, err)
		}
		return ""
	})
	if err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Delete(ctx, "sink", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	most, mostWhat, sawBindingWhileBound := 0, []string(nil), false
	rollout.Poll(t, 3*time.Minute, "the paced unbinding to end and the Binding to go", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		bound := 0
		for i := range list.Items {
			if rollout.SinkOf(&list.Items[i]) != "" {
				bound++
			}
		}
		// Pods, not the Deployments' generations, say what is changing:
		// removing the records at the end updates every Deployment's
		// annotations (a Deployment counts those in its generation) and
		// changes no pod.
		changing, names, err := rollout.TemplateNotRolledOut(ctx, kube, ns)
		if err != nil {
			return err.Error()
		}
		if changing > most {
			most, mostWhat = changing, names
		}
		_, err = dyn.Resource(rollout.SinkBindings).Namespace(ns).Get(ctx, "sink", metav1.GetOptions{})
		if err == nil && bound > 0 && bound < 12 {
			sawBindingWhileBound = true
		}
		if err == nil || bound > 0 {
			return fmt.Sprintf("%d still bound, Binding there: %v", bound, err == nil)
		}
		return ""
	})
	if most > 3 {
		t.Errorf("%d Deployments changed and not rolled out at once during the unbinding, more than 3: %s", most, strings.Join(mostWhat, " "))
	}
	if !sawBindingWhileBound {
		t.Errorf("never saw the Binding kept while some of its subjects were unbound and others not: the unbinding was not paced")
	}
	t.Logf("paced unbinding of 12 Deployments: at most %d changing at once", most)
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Items {
		for _, key := range append(slices.Clone(duck.RecordAnnotations), duck.RollbackAnnotation) {
			if v, ok := d.Annotations[key]; ok {
				t.Errorf("Deployment %s keeps %s=%q after its Binding went", d.Name, key, v)
			}
		}
	}
}

// TestTwoBindingsKeepTheirRecords binds 4 Deployments with two
// SinkBindings that roll back (the same sink, so that neither undoes the
// other's value; the second also adds a forwarder, so that it changes the
// template: a change of records only is written without a wave, and
// records no rollout): each keeps its own rollout and rollback records;
// deleting one removes its records and leaves the other's.
func TestTwoBindingsKeepTheirRecords(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "rollout-two-")
	rollout.CreateDeployments(t, kube, ns, 4, 1)
	rollout.StartController(t, env)
	policy := map[string]any{psbinding.RolloutMaxChangingAnnotation: "2", psbinding.RolloutRollbackAnnotation: "true"}
	for _, name := range []string{"first", "second"} {
		forwarder := map[string]string{"second": "registry.example/forwarder:1"}[name]
		b := rollout.SinkBinding(ns, name, map[string]any{"app": "web"}, "https://sink.example.com/same", forwarder, policy)
		if _, err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rollout.Poll(t, 3*time.Minute, name+" to roll out", func() string {
			if c, ro := rollout.Ready(t, dyn, ns, name); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Sprintf("Ready %+v, rollout %+v", c, ro)
			}
			return ""
		})
	}
	records := func(d *appsv1.Deployment) (changes duck.Changes, rollbacks duck.Rollbacks) {
		changes = duck.ChangesOf(d.Annotations)
		rollbacks, err := duck.RollbacksOf(d.Annotations)
		if err != nil {
			t.Fatal(err)
		}
		return changes, rollbacks
	}
	list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		changes, rollbacks := records(&list.Items[i])
		if len(changes) != 2 || len(rollbacks) != 2 {
			t.Errorf("Deployment %s: rollout records %v, rollback records %v; want one of each per Binding", list.Items[i].Name, changes, rollbacks)
		}
	}
	if err := dyn.Resource(rollout.SinkBindings).Namespace(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, time.Minute, "the first Binding's records to go and the second's to stay", func() string {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for i := range list.Items {
			d := &list.Items[i]
			changes, rollbacks := records(d)
			if len(changes) != 1 || len(rollbacks) != 1 || !strings.Contains(d.Annotations[duck.RolloutAnnotation], "/second@") {
				return fmt.Sprintf("%s: rollout %q, rollback %v", d.Name, d.Annotations[duck.RolloutAnnotation], rollbacks)
			}
		}
		return ""
	})
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}
