package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/faults"
)

// A subject that another client edits ten times a second (annotations,
// replicas, another container's env) still receives the Binding, the
// Binding reports Ready (how soon is logged: a few seconds on an idle
// machine), and every edit of the other client survives: with the webhook in force, as users run it, and with
// the reconciler alone.
func TestSubjectEditedTenTimesASecondIsBoundWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	for _, tc := range []struct {
		name      string
		noWebhook bool
	}{{name: "with the webhook"}, {name: "reconciler alone", noWebhook: true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := faults.Start(t, env, repoRoot)
			ns := h.Namespace("busy-")
			ctx := context.Background()
			d := faults.Deployment(ns, "busy", "busy")
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "side"})
			if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.noWebhook {
				if err := h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, faults.ConfigName, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}

			// The other client: a patch every 100 ms, each of another kind.
			var edits atomic.Int64
			var editErrs []string
			var mu sync.Mutex
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for n := 1; ; n++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					var patch string
					switch n % 3 {
					case 0:
						patch = fmt.Sprintf(`{"metadata":{"annotations":{"editor/n":"%d"}}}`, n)
					case 1:
						patch = fmt.Sprintf(`{"spec":{"replicas":%d}}`, n%5+1)
					case 2:
						patch = fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"side","env":[{"name":"EDIT","value":"%d"}]}]}}}}`, n)
					}
					_, err := h.Kube.AppsV1().Deployments(ns).Patch(ctx, "busy", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
					if err != nil {
						mu.Lock()
						editErrs = append(editErrs, err.Error())
						mu.Unlock()
						continue
					}
					edits.Store(int64(n))
				}
			})
			time.Sleep(time.Second) // the edits are under way
			h.Binding(ns, "gh", "busy", "")
			// Limits for two busy cores; the times are logged below.
			_, took := h.WaitReady(ns, "gh", metav1.ConditionTrue, duck.ReasonBindingAvailable, 60*time.Second)
			bound := h.Eventually("subject bound", 30*time.Second, func() (string, error) {
				got, err := h.Kube.AppsV1().Deployments(ns).Get(ctx, "busy", metav1.GetOptions{})
				if err != nil || !faults.Bound(got) {
					return "not bound", err
				}
				return "", nil
			})
			time.Sleep(time.Second) // more edits, after the Binding
			close(stop)
			wg.Wait()
			t.Logf("Ready after %v, bound %v later, while %d edits were made", took, bound, edits.Load())

			mu.Lock()
			if len(editErrs) > 0 {
				t.Errorf("%d of the other client's edits failed, first: %s", len(editErrs), editErrs[0])
			}
			mu.Unlock()
			// Every edit survived: the last of each kind is what the object
			// holds, next to the Binding's volume.
			last := int(edits.Load())
			got, err := h.Kube.AppsV1().Deployments(ns).Get(ctx, "busy", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lastOf := func(kind int) int {
				for n := last; n > 0; n-- {
					if n%3 == kind {
						return n
					}
				}
				return 0
			}
			if want := fmt.Sprint(lastOf(0)); got.Annotations["editor/n"] != want {
				t.Errorf("annotation editor/n = %q, want %s", got.Annotations["editor/n"], want)
			}
			if want := int32(lastOf(1)%5 + 1); got.Spec.Replicas == nil || *got.Spec.Replicas != want {
				t.Errorf("replicas = %v, want %d", got.Spec.Replicas, want)
			}
			side := got.Spec.Template.Spec.Containers[1]
			if want := fmt.Sprint(lastOf(2)); len(side.Env) != 1 || side.Env[0].Value != want {
				t.Errorf("side env = %v, want EDIT=%s", side.Env, want)
			}
			if !faults.Bound(got) {
				t.Error("the Binding's volume is gone")
			}
			if tc.noWebhook {
				h.InstallConfiguration() // for the harness's cleanup
			}
			h.Audit(ns)
		})
	}
}

// shapeless creates an object of a kind whose pod template is not at
// spec.template: variant "elsewhere" keeps it at spec.workload.template,
// "blank" has none, "odd" has a string there.
func shapeless(t *testing.T, h *faults.Harness, ns, kind, name string, dryRun bool) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{}
	switch kind {
	case "Elsewhere":
		spec["workload"] = map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "app"}}}}}
	case "Blank":
		spec["replicas"] = int64(1)
	case "Odd":
		spec["template"] = "not an object"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "shapeless.bindkit.dev/v1", "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": map[string]any{"app": "shapeless"}},
		"spec":     spec,
	}}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	created, err := h.Dyn.Resource(schema.GroupVersionResource{Group: "shapeless.bindkit.dev", Version: "v1", Resource: strings.ToLower(kind) + "s"}).
		Namespace(ns).Create(context.Background(), u, opts)
	if err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
	return created
}

// Subjects whose kind has no pod template where the default shape looks
// are never written by either path: the Binding says why, naming the kind
// and the path, and nothing loops.
func TestSubjectsWithoutPodTemplateAreNeverWrittenWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := h.Namespace("shapeless-")
	ctx := context.Background()
	kinds := []string{"Elsewhere", "Blank", "Odd"}
	before := map[string]string{}
	for _, kind := range kinds {
		before[kind] = shapeless(t, h, ns, kind, "existing", false).GetResourceVersion()
		b := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": v1alpha1.Kind,
			"metadata": map[string]any{"namespace": ns, "name": strings.ToLower(kind)},
			"spec": map[string]any{"secret": map[string]any{"name": "github-token"}, "subject": map[string]any{
				"apiVersion": "shapeless.bindkit.dev/v1", "kind": kind,
				"selector": map[string]any{"matchLabels": map[string]any{"app": "shapeless"}}}},
		}}
		if _, err := h.Dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			h.Dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Delete(context.Background(), strings.ToLower(kind), metav1.DeleteOptions{})
		})
	}
	for _, kind := range kinds {
		c, _ := h.WaitReady(ns, strings.ToLower(kind), metav1.ConditionFalse, psbinding.ReasonSubjectHasNoPodTemplate, 30*time.Second)
		if !strings.Contains(c.Message, kind) || !strings.Contains(c.Message, "spec.template") {
			t.Errorf("%s: message %q does not name the kind and the path", kind, c.Message)
		}
	}

	// Admission lets new ones through unchanged.
	for _, kind := range kinds {
		created := shapeless(t, h, ns, kind, "new-"+strings.ToLower(kind), false)
		want := shapeless(t, h, ns, kind, "dry-"+strings.ToLower(kind), true) // what was sent, for comparison
		if _, found, _ := unstructured.NestedFieldNoCopy(created.Object, "spec", "template", "spec"); found {
			t.Errorf("%s created with a pod template added", kind)
		}
		if created.GetAnnotations()[duck.BoundAnnotation] != "" || len(created.GetAnnotations()) != len(want.GetAnnotations()) {
			t.Errorf("%s created with annotations %v", kind, created.GetAnnotations())
		}
	}

	// Nothing writes the subjects: over 30 seconds their resourceVersions
	// stay where they were.
	time.Sleep(30 * time.Second)
	for _, kind := range kinds {
		got, err := h.Dyn.Resource(schema.GroupVersionResource{Group: "shapeless.bindkit.dev", Version: "v1", Resource: strings.ToLower(kind) + "s"}).
			Namespace(ns).Get(ctx, "existing", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetResourceVersion() != before[kind] {
			t.Errorf("%s written: resourceVersion %s, created at %s", kind, got.GetResourceVersion(), before[kind])
		}
	}
}

// A fresh Binding's normal path, from creation to Ready with its subjects
// bound, records no Warning event.
func TestFreshBindingRecordsNoWarningWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := h.Namespace("fresh-")
	ctx := context.Background()
	for i := range 5 {
		if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, fmt.Sprintf("web-%d", i), "web"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.Binding(ns, "gh", "web", "")
	h.WaitReady(ns, "gh", metav1.ConditionTrue, duck.ReasonBindingAvailable, 30*time.Second)
	time.Sleep(2 * time.Second) // the reconciles the first one's writes cause
	events, err := h.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning event on %s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	h.Audit(ns)
}

// Bindings that exist before the process starts are reconciled once it
// leads, with leader election and without.
func TestBindingsFromBeforeStartUpAreReconciledWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	for _, tc := range []struct {
		name string
		args []string
	}{{name: "leader election"}, {name: "disable-ha", args: []string{"--disable-ha"}}} {
		t.Run(tc.name, func(t *testing.T) {
			h := faults.Start(t, env, repoRoot, tc.args...)
			ns := h.Namespace("startup-")
			ctx := context.Background()
			h.StopProcess()
			if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, "web", "web"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.Binding(ns, "gh", "web", "")
			h.StartProcess(tc.args...)
			h.Eventually("bound after start-up", 40*time.Second, func() (string, error) {
				got, err := h.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil || !faults.Bound(got) {
					return "not bound", err
				}
				return "", nil
			})
			h.WaitReady(ns, "gh", metav1.ConditionTrue, duck.ReasonBindingAvailable, 20*time.Second)
			h.Audit(ns)
		})
	}
}

// Two replicas with leader election: the leader is killed while it binds
// hundreds of subjects; the other takes over within the lease duration and
// finishes the work.
func TestLeaderKilledMidReconcileWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	replica, replicaPort := h.StartReplica()
	h.Service(h.Port, replicaPort)
	replicaKilled := false
	defer func() {
		if replicaKilled {
			return
		}
		if err := replica.Stop(); err != nil {
			t.Errorf("replica: %v\n%s", err, replica.LogTail(30))
		}
	}()
	ns := h.Namespace("handover-")
	ctx := context.Background()
	const n = 400
	for i := range n {
		if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, fmt.Sprintf("web-%03d", i), "web"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	replicaLeads := false
	h.Eventually("a leader", 30*time.Second, func() (string, error) {
		switch {
		case strings.Contains(h.Process().Log(), "became leader"):
		case strings.Contains(replica.Log(), "became leader"):
			replicaLeads = true
		default:
			return "no leader yet", nil
		}
		return "", nil
	})
	countBound := func() int {
		list, err := h.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		return len(slices.DeleteFunc(list.Items, func(d appsv1.Deployment) bool { return !faults.Bound(&d) }))
	}
	h.Binding(ns, "gh", "web", "")
	h.Eventually("the leader under way", 30*time.Second, func() (string, error) {
		if countBound() == 0 {
			return "nothing bound yet", nil
		}
		return "", nil
	})
	follower := replica
	if replicaLeads {
		replica.Kill()
		replicaKilled = true
		follower = h.Process()
	} else {
		h.KillProcess()
	}
	atKill := countBound()
	var took time.Duration
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the follower's log:\n%s", follower.LogTail(60))
		}
	})
	took = h.Eventually("the other replica finishes", 60*time.Second, func() (string, error) {
		if got := countBound(); got != n {
			return fmt.Sprintf("%d of %d bound", got, n), nil
		}
		return "", nil
	})
	t.Logf("killed the leader with %d of %d bound; all bound %v later (lease duration 15s)", atKill, n, took)
	if !strings.Contains(follower.Log(), "became leader") {
		t.Errorf("the follower never became leader:\n%s", follower.LogTail(20))
	}
	// The follower leads now: what the killed leader left half done must
	// be the truth too.
	h.Audit(ns)
	if replicaLeads {
		// The harness's process took over; the killed replica needs no stop.
		return
	}
	// The harness's process was killed; start it again so its cleanup has a
	// process to stop.
	h.StartProcess()
}

// webhookUpdates is how many UPDATEs the kube-apiserver has sent to the
// example's webhook, from its own metrics.
func webhookUpdates(h *faults.Harness, webhookName string) float64 {
	h.T.Helper()
	raw, err := h.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		h.T.Fatalf("kube-apiserver metrics: %v", err)
	}
	var n float64
	for line := range strings.SplitSeq(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_count{") ||
			!strings.Contains(line, `name="`+webhookName+`"`) || !strings.Contains(line, `operation="UPDATE"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			h.T.Fatalf("kube-apiserver metrics: %q: %v", line, err)
		}
		n += v
	}
	return n
}

// The reconciler's patches of subjects are not sent through the webhook
// (psbinding.OwnPatchesCondition, with the example binary's default
// flags), and subjects are bound all the same; another client's update of
// a subject still is.
func TestReconcilerPatchesSkipTheWebhookWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := h.Namespace("own-")
	ctx := context.Background()
	// A first Binding puts the namespace in the webhook's scope.
	h.Binding(ns, "first", "first", "")
	h.WaitAdmissionBinds(ns, "first")
	cfg, err := h.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	webhookName := cfg.Webhooks[0].Name
	const n = 40
	for i := range n {
		if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, fmt.Sprintf("web-%02d", i), "web"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := webhookUpdates(h, webhookName)
	h.Binding(ns, "gh", "web", "")
	h.Eventually("every subject bound by the reconciler", 60*time.Second, func() (string, error) {
		list, err := h.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return "", err
		}
		unbound := 0
		for i := range list.Items {
			if !faults.Bound(&list.Items[i]) {
				unbound++
			}
		}
		if unbound > 0 || len(list.Items) != n {
			return fmt.Sprintf("%d of %d unbound", unbound, len(list.Items)), nil
		}
		return "", nil
	})
	if got := webhookUpdates(h, webhookName) - before; got != 0 {
		t.Errorf("the kube-apiserver called the webhook %v times for the reconciler's %d patches, want 0", got, n)
	}
	before = webhookUpdates(h, webhookName)
	if _, err := h.Kube.AppsV1().Deployments(ns).Patch(ctx, "web-00", types.MergePatchType, []byte(`{"metadata":{"annotations":{"edited":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := webhookUpdates(h, webhookName) - before; got != 1 {
		t.Errorf("a user's update called the webhook %v times, want 1", got)
	}
	h.Audit(ns)
}
