package sinkbinding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// rig is the example binary against the package's control plane, with a
// namespace of the test's own.
type rig struct {
	t      *testing.T
	env    *testenv.Environment
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	ns     string
	binary string
}

// webhookConfigPath is the example's webhook configuration; start points
// it at the port each process's webhook reports.
const webhookConfigPath = repoRoot + "/examples/sinkbinding/config/500-webhook-configuration.yaml"

func newRig(t *testing.T, prefix string) *rig {
	env := controlPlane.Env(t)
	r := &rig{t: t, env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}
	r.ns = env.CreateNamespace(t, prefix)
	if _, err := r.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg, err := demo.WebhookConfigurationAt(webhookConfigPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The configuration of a fresh install, created by the first start.
	api := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := api.Delete(t.Context(), cfg.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := policy.RemoveMutatingPolicy(t.Context(), r.kube, policy.MutatingPolicyName(sinkBindings.GroupResource())); err != nil {
		t.Fatal(err)
	}
	r.binary, err = demo.BuiltFor(env, repoRoot, "./examples/sinkbinding/cmd/controller", "sinkbinding-controller")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs the example binary with its default flags and args, and
// points the webhook configuration at the port its webhook bound (the
// kernel picks it), creating the configuration the first time.
func (r *rig) start(args ...string) *demo.Controller {
	r.t.Helper()
	ctrl, err := demo.StartController(r.env, r.binary, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	if ctrl.WebhookPort != 0 {
		cfg, err := demo.WebhookConfigurationAt(webhookConfigPath, ctrl.WebhookPort)
		if err == nil {
			err = demo.InstallWebhookConfiguration(r.t.Context(), r.kube, cfg)
		}
		if err != nil {
			ctrl.Kill()
			r.t.Fatal(err)
		}
	}
	r.t.Cleanup(func() {
		if exited, _ := ctrl.Exited(); !exited {
			ctrl.Kill()
		}
		if r.t.Failed() {
			r.t.Logf("controller log:\n%s", ctrl.LogTail(40))
		}
	})
	return ctrl
}

func (r *rig) stop(ctrl *demo.Controller) {
	r.t.Helper()
	if err := ctrl.Stop(); err != nil {
		r.t.Errorf("stop controller: %v\n%s", err, ctrl.LogTail(40))
	}
}

// create creates obj (a dry run when dry) in the rig's namespace.
func (r *rig) create(ctx context.Context, obj runtime.Object, dry bool) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	gvr, err := resourceOf(u)
	if err != nil {
		return nil, err
	}
	opts := metav1.CreateOptions{}
	if dry {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return r.dyn.Resource(gvr).Namespace(r.ns).Create(ctx, u, opts)
}

// editSink sets the Binding's sink and returns the generation it made.
func (r *rig) editSink(name, sink string) int64 {
	// A merge patch: the controller's status writes cannot make it conflict.
	edit, err := json.Marshal(map[string]any{"spec": map[string]any{"sink": sink}})
	if err != nil {
		r.t.Fatal(err)
	}
	got, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Patch(r.t.Context(), name, types.MergePatchType, edit, metav1.PatchOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return got.GetGeneration()
}

// creator creates subjects of every shape in turn, one every 20 ms, until
// stopped; it keeps what the API server returned.
type creator struct {
	mu      sync.Mutex
	created []*unstructured.Unstructured
	started []time.Time // when each create was sent
	refused []string
	// refusedAt is when each refused create was sent, refusedBy when its
	// refusal came back.
	refusedAt, refusedBy []time.Time
	stop                 func()
	done                 chan struct{}
}

func (r *rig) startCreating(kinds []string, labels map[string]string) *creator {
	ctx, cancel := context.WithCancel(r.t.Context())
	c := &creator{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for i := 0; ctx.Err() == nil; i++ {
			kind := kinds[i%len(kinds)]
			at := time.Now()
			got, err := r.create(ctx, shapes[kind].object(r.ns, fmt.Sprintf("c-%s-%d", strings.ToLower(kind), i), labels), false)
			c.mu.Lock()
			switch {
			case err == nil:
				c.created = append(c.created, got)
				c.started = append(c.started, at)
			case ctx.Err() == nil:
				c.refused = append(c.refused, fmt.Sprintf("%s %d: %v", kind, i, err))
				c.refusedAt = append(c.refusedAt, at)
				c.refusedBy = append(c.refusedBy, time.Now())
			}
			c.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	r.t.Cleanup(c.end)
	return c
}

func (c *creator) end() { c.stop(); <-c.done }

// TestRecordsNameWhatSubjectsCarryThroughExampleBinary edits a
// declarative Binding 20 times while subjects of every shape are created
// every 20 ms, with the example binary running (by policy, default
// flags), then 20 times more with it stopped, then runs it again: every
// subject records a generation whose sink it carries (the policy applies
// the published Spec and records the generation it was published at),
// those the reconciler can patch catch up with the last generation, and
// the audit finds nothing.
func TestRecordsNameWhatSubjectsCarryThroughExampleBinary(t *testing.T) {
	r := newRig(t, "records-")
	sinkAt := map[int64]string{}
	created, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), sinkBinding(r.ns, "rec",
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "https://sink.example.com/1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sinkAt[created.GetGeneration()] = "https://sink.example.com/1"
	// One Binding per shape, all edited together.
	names := []string{"rec"}
	for kind := range shapes {
		if kind == "Deployment" {
			continue
		}
		u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(shapes[kind].object("", "", nil))
		name := "rec-" + strings.ToLower(kind)
		if _, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), sinkBinding(r.ns, name,
			map[string]any{"apiVersion": u["apiVersion"], "kind": kind, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "https://sink.example.com/1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	ctrl := r.start()
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range shapes {
			if !yield(k) {
				return
			}
		}
	})
	c := r.startCreating(kinds, web)
	edit := func(n int) {
		for range n {
			sink := fmt.Sprintf("https://sink.example.com/%d", len(sinkAt)+1)
			var gen int64
			for _, name := range names {
				gen = r.editSink(name, sink)
			}
			sinkAt[gen] = sink // every Binding was created and edited alike
			time.Sleep(150 * time.Millisecond)
		}
	}
	edit(20)
	// Creates go on while the process is stopped: only the policy admits
	// them, so the handover must be complete first (the webhook stays in
	// the path until probes see the policy in force, which a loaded
	// kube-apiserver takes a minute or more to load: 78 s were not enough
	// on 2 cores at load 20).
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(ctrl.Log(), "admission policy seen in force"), nil
	}); err != nil {
		t.Fatalf("the example binary did not see its admission policy in force within 3 minutes: %v\n%s", err, ctrl.LogTail(40))
	}
	r.stop(ctrl)
	edit(20)
	ctrl = r.start()
	time.Sleep(2 * time.Second)
	c.end()
	time.Sleep(10 * time.Second) // the process runs 10 s
	t.Logf("%d subjects created, %d refused, over %d generations", len(c.created), len(c.refused), len(sinkAt))
	for _, refusal := range c.refused {
		t.Errorf("create refused: %s", refusal)
	}
	last := int64(len(sinkAt))
	poll(t, "every subject to carry what it records, the reconciler's at the last generation", func() (string, error) {
		var problems []string
		for _, kind := range kinds {
			list, err := r.dyn.Resource(shapes[kind].gvr).Namespace(r.ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			for i := range list.Items {
				u := &list.Items[i]
				if metav1.GetControllerOf(u) != nil {
					continue
				}
				if p := carries(u, shapes[kind].podSpec, sinkAt, last, kind != "Pod" && kind != "Job"); p != "" {
					problems = append(problems, fmt.Sprintf("%s %s: %s", kind, u.GetName(), p))
				}
			}
		}
		if len(problems) > 3 {
			problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
		}
		return strings.Join(problems, "; "), nil
	})
	bindingtest.Audit(t, r.env, bindingtest.AuditOptions{Namespace: r.ns})
	r.stop(ctrl)
}

// carries says how a subject's record and content disagree, "" when
// they do not: the sink of every container is the one of the generation
// the record names (none without a record), and with current that
// generation is last.
func carries(u *unstructured.Unstructured, podSpec []string, sinkAt map[int64]string, last int64, current bool) string {
	var gen int64
	for by, g := range duck.BoundOf(u.GetAnnotations()) {
		if strings.HasPrefix(by.Name, "rec") {
			gen = g
		}
	}
	m, _, _ := unstructured.NestedMap(u.Object, podSpec...)
	ps := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ps); err != nil {
		return err.Error()
	}
	want := sinkAt[gen]
	for _, ctr := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
		got := ""
		for _, e := range ctr.Env {
			if e.Name == v1alpha1.SinkEnv {
				got = e.Value
			}
		}
		if got != want {
			return fmt.Sprintf("records generation %d (sink %q) but container %s has K_SINK %q", gen, want, ctr.Name, got)
		}
	}
	if current && gen != last {
		return fmt.Sprintf("records generation %d, not the last, %d", gen, last)
	}
	return ""
}

// TestNoSubjectCreatedUnboundAcrossInstallAndSwitches creates a Job every
// 20 ms (a Job is bound at admission or never) from before a fresh
// install, through the policy taking over from the webhook and two
// switches of path: once admission binds at all, every Job created is
// bound.
func TestNoSubjectCreatedUnboundAcrossInstallAndSwitches(t *testing.T) {
	r := newRig(t, "window-")
	if _, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), sinkBinding(r.ns, "win",
		map[string]any{"apiVersion": "batch/v1", "kind": "Job", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "https://sink.example.com/w"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := r.startCreating([]string{"Job"}, web)
	ctrl := r.start()
	var ready time.Time
	poll(t, "admission to bind a Job", func() (string, error) {
		got, err := r.create(t.Context(), shapes["Job"].object(r.ns, "probe", web), true)
		if err != nil {
			return err.Error(), nil
		}
		problem, _ := bound(got, shapes["Job"].podSpec, "win", "https://sink.example.com/w")
		if problem == "" {
			ready = time.Now()
		}
		return problem, nil
	})
	rules := func() (int, error) {
		cfg, err := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "sinkbindings.webhook.bindkit.dev", metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return len(cfg.Webhooks[0].Rules), nil
	}
	policyName := policy.MutatingPolicyName(sinkBindings.GroupResource())
	byPolicy := func(what string) {
		poll(t, what, func() (string, error) {
			if _, err := r.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(t.Context(), policyName, metav1.GetOptions{}); err != nil {
				return err.Error(), nil
			}
			n, err := rules()
			return map[bool]string{true: "", false: "the webhook is still in the path"}[n == 0], err
		})
	}
	byPolicy("the policy to take over from the webhook")
	time.Sleep(time.Second)
	r.stop(ctrl)
	ctrl = r.start("--declarative-admission=webhook")
	poll(t, "the webhook to take over and the policy to go", func() (string, error) {
		if _, err := r.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(t.Context(), policyName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the policy is still there (%v)", err), nil
		}
		n, err := rules()
		return map[bool]string{true: "", false: "the webhook has no rules"}[n > 0], err
	})
	time.Sleep(time.Second)
	// With the webhook's path chosen, the webhook is the path: while no
	// process serves it, failurePolicy Fail refuses creates, as any
	// webhook does. That gap, from the stop to the next process
	// answering, is the operator's choice of path, not bindkit's state.
	gapFrom := time.Now()
	r.stop(ctrl)
	ctrl = r.start()
	poll(t, "the next process to answer admission", func() (string, error) {
		if _, err := r.create(t.Context(), shapes["Job"].object(r.ns, "probe", web), true); err != nil {
			return err.Error(), nil
		}
		return "", nil
	})
	gapTo := time.Now()
	byPolicy("the policy to take over again")
	time.Sleep(time.Second)
	c.end()
	after, unbound := 0, 0
	for i, job := range c.created {
		if c.started[i].Before(ready) {
			continue
		}
		after++
		if problem, _ := bound(job, shapes["Job"].podSpec, "win", "https://sink.example.com/w"); problem != "" {
			unbound++
			t.Errorf("Job %s created %v after admission first bound: %s", job.GetName(), c.started[i].Sub(ready).Round(time.Millisecond), problem)
		}
	}
	t.Logf("%d Jobs created, %d once admission bound; %d unbound; %d refused", len(c.created), after, unbound, len(c.refused))
	for i, refusal := range c.refused {
		// A create sent just before the stop whose webhook call met the
		// server shutting down (its idle connections closed) is the
		// gap's too: it was admitted during it.
		if sent, back := c.refusedAt[i], c.refusedBy[i]; !back.Before(gapFrom) && !sent.After(gapTo) {
			t.Logf("refused while no process served the webhook's path (%v): %s", gapTo.Sub(gapFrom).Round(time.Millisecond), refusal)
			continue
		}
		t.Errorf("create refused: %s", refusal)
	}
	bindingtest.Audit(t, r.env, bindingtest.AuditOptions{Namespace: r.ns})
	r.stop(ctrl)
}

// TestBindkitsOwnStateNeverRefusesCreates creates subjects, by policy,
// beside Bindings that give the policy nothing to apply: one created while
// the process is down (never published), one whose status holds no
// declared Spec, one with an empty selector before it is published; none
// refuses a create. Published, the empty selector binds every Deployment
// of its namespace, on both paths. A Binding that the CRD cannot store
// (1 MiB, an invalid Secret name, an image with a leading space) is
// refused at its own create, naming the field.
func TestBindkitsOwnStateNeverRefusesCreates(t *testing.T) {
	r := newRig(t, "ownstate-")
	ctrl := r.start()
	poll(t, "the policy to be in force", func() (string, error) {
		if !strings.Contains(ctrl.Log(), "admission policy seen in force") {
			// In force is seen with a published Binding: give it one.
			if _, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Get(t.Context(), "seed", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				_, err = r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), sinkBinding(r.ns, "seed",
					map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "seeded"}, "https://sink.example.com/seed"), metav1.CreateOptions{})
				return "not yet", err
			}
			return "not yet", nil
		}
		return "", nil
	})
	r.stop(ctrl)
	deployments := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for key, val := range m {
			out[key] = val
		}
		return out
	}
	for _, b := range []*unstructured.Unstructured{
		sinkBinding(r.ns, "down", with(deployments, "selector", map[string]any{"matchLabels": map[string]any{"app": "web"}}), "https://sink.example.com/down"),
		sinkBinding(r.ns, "all", with(deployments, "selector", map[string]any{}), "https://sink.example.com/all"),
		sinkBinding(r.ns, "nodecl", with(deployments, "selector", map[string]any{"matchLabels": map[string]any{"app": "web"}}), "https://sink.example.com/nodecl"),
	} {
		got, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), b, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.GetName() == "nodecl" {
			// A status without the declared Spec, as a hand or an older
			// controller might write it.
			got.Object["status"] = map[string]any{"observedGeneration": got.GetGeneration()}
			if _, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := r.startCreating([]string{"Deployment", "Pod"}, web)
	time.Sleep(2 * time.Second)
	c.end()
	if len(c.refused) > 0 || len(c.created) == 0 {
		t.Errorf("with the process down: %d created, %d refused: %v", len(c.created), len(c.refused), c.refused)
	}
	for _, obj := range c.created {
		if rec := obj.GetAnnotations()[duck.BoundAnnotation]; strings.Contains(rec, "/down@") || strings.Contains(rec, "/all@") || strings.Contains(rec, "/nodecl@") {
			t.Errorf("%s %s records %q: a Binding that published nothing bound it", obj.GetKind(), obj.GetName(), rec)
		}
	}

	// Published, the empty selector selects every Deployment of the
	// namespace, on both paths.
	for _, args := range [][]string{nil, {"--declarative-admission=webhook"}} {
		ctrl := r.start(args...)
		if args != nil {
			// The policy the previous process left would answer the
			// probe below: wait until this one, on the webhook's path,
			// has taken it away.
			poll(t, "the webhook's path to take the policy away", func() (string, error) {
				_, err := r.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(t.Context(), policy.MutatingPolicyName(sinkBindings.GroupResource()), metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return "", nil
				}
				return fmt.Sprintf("the policy is still there (%v)", err), nil
			})
		}
		poll(t, fmt.Sprintf("the empty selector to bind at admission (%v)", args), func() (string, error) {
			got, err := r.create(t.Context(), shapes["Deployment"].object(r.ns, "any", map[string]string{"whatever": "x"}), true)
			if err != nil {
				return err.Error(), nil
			}
			if _, ok := duck.BoundOf(got.GetAnnotations()).Lookup(duck.BoundBy{Resource: sinkBindings.GroupResource(), Name: "all"}); !ok {
				return fmt.Sprintf("not bound by the empty selector: %v", got.GetAnnotations()), nil
			}
			return "", nil
		})
		r.stop(ctrl)
	}

	// What the CRD cannot store is refused at the Binding's create.
	for _, tc := range []struct {
		name, field string
		spec        func(map[string]any)
	}{
		{"huge", "spec.sink", func(s map[string]any) { s["sink"] = "https://" + strings.Repeat("x", 1<<20) }},
		{"badsecret", "spec.caCertsSecret", func(s map[string]any) { s["caCertsSecret"] = "Bad_Name" }},
		{"spaced", "spec.forwarderImage", func(s map[string]any) { s["forwarderImage"] = " busybox" }},
	} {
		b := sinkBinding(r.ns, tc.name, with(deployments, "name", "x"), "https://sink.example.com/x")
		tc.spec(b.Object["spec"].(map[string]any))
		_, err := r.dyn.Resource(sinkBindings).Namespace(r.ns).Create(t.Context(), b, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Binding %s: created (%v), want a refusal naming %s", tc.name, err, tc.field)
		} else if len(err.Error()) > 2048 {
			t.Errorf("Binding %s: the refusal is %d bytes long", tc.name, len(err.Error()))
		}
	}
}
