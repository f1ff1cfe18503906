package upgrade

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

// waitLimit bounds each wait: a hung test on two busy cores, not a
// figure (the figures are logged).
const waitLimit = 3 * time.Minute

// How many Deployments of each part of the scenario (one pod each).
const (
	steadyN = 4 // bound by Binding steady, which nothing changes
	editN   = 3 // bound by Binding edit, edited during each swap
	pacedN  = 6 // bound by Binding paced (max-changing 1), rolling out across each swap
	goneN   = 2 // bound by gone-1 (deleted after the upgrade) or gone-2 (after the downgrade)
)

// TestSwapBothWays: the controller of v0.5.0 binds workloads, is replaced
// by this tree's, which is then replaced by v0.5.0's again, each swap
// under load. See the package doc for what is counted.
func TestSwapBothWays(t *testing.T) {
	env := controlPlane.Env(t)
	previous := buildRelease(t, release)
	current, err := demo.BuiltFor(env, repoRoot, demo.ControllerPackage, "githubbinding-controller")
	if err != nil {
		t.Fatal(err)
	}
	// The binary users run says what it was built from (v0.5.0's has no
	// --version: it came with this release).
	out, err := exec.Command(current, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "module: github.com/bindkit/bindkit ") || !strings.Contains(string(out), "\ngo: go1.") {
		t.Errorf("githubbinding-controller --version: %v\n%s", err, out)
	}
	t.Logf("this tree's controller --version:\n%s", out)
	r := newRig(t, env)
	r.proc = r.start(previous)
	r.installWebhook()
	r.setUp()
	r.phase(phase{name: "upgrade", from: "v0.5.0", to: "this tree", binary: current, secret: "github-token-2", gone: "gone-1"})
	r.phase(phase{name: "downgrade", from: "this tree", to: "v0.5.0", binary: previous, secret: "github-token", gone: "gone-2"})
}

// rig is the scenario's world: the control plane's clients, the
// namespace, the Service in front of the controller, and the controller
// process that leads.
type rig struct {
	t    *testing.T
	env  *testenv.Environment
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
	svc  *service
	proc *demo.Controller
}

func newRig(t *testing.T, env *testenv.Environment) *rig {
	r := &rig{t: t, env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}
	createSystemNamespace(t, r.kube)
	r.svc = startService(t)
	r.ns = env.CreateNamespace(t, "upgrade-")
	t.Cleanup(r.cleanup)
	return r
}

// start starts a controller binary as users run it (leader election on,
// as with two replicas) and waits until its webhook is ready.
func (r *rig) start(binary string) *demo.Controller {
	r.t.Helper()
	c, err := demo.StartController(r.env, binary)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := demo.WaitReady(r.t.Context(), r.kube, c.WebhookPort, time.Minute); err != nil {
		c.Kill()
		r.t.Fatalf("%v\n%s", err, c.LogTail(30))
	}
	return c
}

// installWebhook installs config/'s webhook configuration, reaching the
// Service, and points the Service at the running controller.
func (r *rig) installWebhook() {
	r.t.Helper()
	r.svc.point(r.proc.WebhookPort)
	cfg, err := demo.WebhookConfiguration(repoRoot, r.svc.port())
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(r.t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// cleanup deletes the Bindings while a controller still runs (their
// finalizers go), then the webhook configuration, then stops it.
func (r *rig) cleanup() {
	ctx := context.Background()
	bindings := r.dyn.Resource(githubBindings).Namespace(r.ns)
	bindings.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if r.proc != nil {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if l, err := bindings.List(ctx, metav1.ListOptions{}); err == nil && len(l.Items) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, demo.WebhookConfigName, metav1.DeleteOptions{})
	if r.proc != nil {
		if r.t.Failed() {
			r.t.Logf("controller log (tail):\n%s", r.proc.LogTail(60))
		}
		if err := r.proc.Stop(); err != nil {
			r.t.Errorf("stop controller: %v", err)
		}
	}
}

// setUp creates the Deployments and the Bindings under the first
// controller and waits until every one is bound and rolled out.
func (r *rig) setUp() {
	t, ctx := r.t, r.t.Context()
	for _, s := range []string{"github-token", "github-token-2"} {
		if _, err := r.kube.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s}, StringData: map[string]string{"token": "not-a-real-token"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for app, n := range map[string]int{"steady": steadyN, "edit": editN, "paced": pacedN, "gone-1": goneN, "gone-2": goneN, "canary-upgrade": 1, "canary-downgrade": 1} {
		for i := range n {
			if err := createDeployment(ctx, r.kube, r.ns, fmt.Sprintf("%s-%d", app, i), app); err != nil {
				t.Fatal(err)
			}
		}
	}
	paced := map[string]any{"rollout.bindings.bindkit.dev/max-changing": "1", "rollout.bindings.bindkit.dev/rollback": "true"}
	for _, name := range []string{"steady", "edit", "load", "paced", "gone-1", "gone-2"} {
		var annotations map[string]any
		if name == "paced" {
			annotations = paced
		}
		if err := createBinding(ctx, r.dyn, r.ns, name, name, "github-token", annotations); err != nil {
			t.Fatal(err)
		}
	}
	took := r.waitReady("steady", "edit", "load", "paced", "gone-1", "gone-2")
	ws := r.snap()
	for name, w := range ws {
		if want := "github-token"; !strings.HasPrefix(w.App, "canary") && w.Secret != want {
			t.Errorf("%s mounts %q, want %q", name, w.Secret, want)
		}
	}
	t.Logf("set up under v0.5.0: %d Deployments bound and rolled out in %v", len(ws)-2, took.Round(time.Second))
	r.audit()
}

// waitReady waits until the Bindings are Ready at their generation and
// every workload has rolled out.
func (r *rig) waitReady(names ...string) time.Duration {
	r.t.Helper()
	took := poll(r.t, waitLimit, "the Bindings Ready and the workloads rolled out", func(ctx context.Context) (string, error) {
		for _, name := range names {
			if why, err := ready(ctx, r.dyn, r.ns, name); why != "" || err != nil {
				return why, err
			}
		}
		return settled(ctx, r.kube, r.ns)
	})
	return took
}

func (r *rig) snap() map[string]workload {
	r.t.Helper()
	ws, err := snapshot(r.t.Context(), r.kube, r.ns)
	if err != nil {
		r.t.Fatal(err)
	}
	return ws
}

func (r *rig) audit() {
	r.t.Helper()
	bindingtest.Audit(r.t, r.env, bindingtest.AuditOptions{Namespace: r.ns, Kinds: []audit.Kind{faults.GithubBindingKind}})
}

// phase is one swap: from one release's controller to another's.
type phase struct {
	name, from, to string
	binary         string // the controller swapped in
	secret         string // what the edited and the paced Bindings mount from this phase on
	gone           string // the Binding deleted after the swap
}

// phase runs one swap under load and checks what it did.
func (r *rig) phase(p phase) {
	t := r.t
	pre, changedBefore := r.pausePacedMidway(p)
	before := r.snap()
	load := startLoad(r, p.name)
	swapTook, leaderAfter := r.swap(p)
	r.canary(p)
	created, failed := load.stop()
	r.waitReady("steady", "edit", "load", "canary-"+p.name)
	after := r.snap()

	// Every workload but those the phase changes: the steady ones, the
	// paused rollout's, the Bindings to delete, and what earlier phases
	// created, edited or bound (with records the other release wrote).
	var still []string
	for _, w := range before {
		if w.App != "edit" && w.App != "canary-"+p.name && !slices.Contains(still, w.App) {
			still = append(still, w.App)
		}
	}
	moved := r.checkUntouched(p, before, after, still...)
	r.checkMovedOnce(p, before, after, "edit")
	admitted := r.checkCreates(p, after, created, failed)

	// The rollout resumes under the controller swapped in: each paced
	// subject moves once in all, whichever controller changed it.
	if err := patchBinding(t.Context(), r.dyn, r.ns, "paced", `{"metadata":{"annotations":{"`+pausedAnnotation+`":null}}}`); err != nil {
		t.Fatal(err)
	}
	r.waitReady("paced")
	r.checkMovedOnce(p, pre, r.snap(), "paced")

	unbound := r.deleteUnder(p)
	r.audit()
	// Nothing moved the steady workloads since, either.
	r.checkUntouched(p, before, r.snap(), "steady")
	t.Logf("%s (%s to %s): swap %v, the new leader %v after the old one's SIGTERM; %d workloads nothing else changed: %d generations moved, %d pods restarted, %d records rewritten; "+
		"%d created during the swap, %d bound at admission and not written again, %d creates failed; %d edited subjects checked to move once; "+
		"paced: %d of %d changed before the swap, the rest after, each checked to move once; %s deleted under %s: %d subjects checked unbound, records checked gone",
		p.name, p.from, p.to, swapTook.Round(time.Millisecond), leaderAfter.Round(time.Millisecond), moved.workloads, moved.generations, moved.pods, moved.records,
		len(created), admitted, failed, editN, changedBefore, pacedN, p.gone, p.to, unbound)
}

// pausePacedMidway edits the paced Binding (to p.secret) and pauses its
// rollout once a wave has changed at least one subject but not all: a
// rollout in flight, recorded on its subjects, across the swap. It
// returns the workloads before the edit, and how many subjects changed.
func (r *rig) pausePacedMidway(p phase) (map[string]workload, int) {
	t, ctx := r.t, r.t.Context()
	pre := r.snap()
	if err := patchBinding(ctx, r.dyn, r.ns, "paced", `{"spec":{"secret":{"name":"`+p.secret+`"}}}`); err != nil {
		t.Fatal(err)
	}
	poll(t, waitLimit, "a first wave of the paced rollout", func(ctx context.Context) (string, error) {
		if n := r.pacedAt(ctx, p.secret); n == 0 {
			return "no paced subject changed yet", nil
		}
		return "", nil
	})
	if err := patchBinding(ctx, r.dyn, r.ns, "paced", `{"metadata":{"annotations":{"`+pausedAnnotation+`":"true"}}}`); err != nil {
		t.Fatal(err)
	}
	poll(t, waitLimit, "the paced rollout paused, its changed subjects rolled out", func(ctx context.Context) (string, error) {
		return settled(ctx, r.kube, r.ns)
	})
	n := r.pacedAt(ctx, p.secret)
	if n == 0 || n == pacedN {
		t.Fatalf("%d of %d paced subjects changed when the rollout paused: not a rollout in flight", n, pacedN)
	}
	return pre, n
}

// pacedAt counts the paced subjects whose template mounts secret.
func (r *rig) pacedAt(ctx context.Context, secret string) int {
	ds, err := r.kube.AppsV1().Deployments(r.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=paced"})
	if err != nil {
		return 0
	}
	n := 0
	for i := range ds.Items {
		if secretOf(&ds.Items[i].Spec.Template.Spec) == secret {
			n++
		}
	}
	return n
}

// swap replaces the leading controller with p.binary's as a rolling
// update of its Deployment does: the new replica starts (a follower: the
// old one holds the lease) and serves, the Service sends new connections
// to it, a Binding is edited meanwhile, the old one gets SIGTERM (its
// webhook drains, its reconciles finish, it releases the lease) and the
// new one leads. It returns how long the swap took and how long after
// the SIGTERM the new replica led.
func (r *rig) swap(p phase) (took, leaderAfter time.Duration) {
	t, ctx := r.t, r.t.Context()
	start := time.Now()
	old := r.proc
	next := r.start(p.binary)
	r.svc.point(next.WebhookPort)
	if err := patchBinding(ctx, r.dyn, r.ns, "edit", `{"spec":{"secret":{"name":"`+p.secret+`"}}}`); err != nil {
		t.Fatal(err)
	}
	holder := leaseHolder(ctx, r.kube)
	stopped := time.Now()
	if err := old.Stop(); err != nil {
		t.Errorf("stop the %s controller: %v\n%s", p.from, err, old.LogTail(30))
	}
	r.proc = next
	poll(t, time.Minute, "the "+p.to+" controller to lead", func(ctx context.Context) (string, error) {
		if h := leaseHolder(ctx, r.kube); h == "" || h == holder {
			return fmt.Sprintf("lease held by %q", h), nil
		}
		return "", nil
	})
	return time.Since(start), time.Since(stopped)
}

// canary creates a Binding for the canary Deployment of the phase and
// waits until the new leader has bound it: its reconciles run, after
// those of the Bindings it found at start.
func (r *rig) canary(p phase) {
	name := "canary-" + p.name
	if err := createBinding(r.t.Context(), r.dyn, r.ns, name, name, "github-token", nil); err != nil {
		r.t.Fatal(err)
	}
	r.waitReady(name)
}

// untouched is what a swap did to the workloads nothing else changed.
type untouched struct {
	workloads, generations, pods, records int
}

// checkUntouched checks the workloads of apps, which nothing but the swap
// could have changed between before and after: the same generation,
// records, pods and ReplicaSets. It counts what moved.
func (r *rig) checkUntouched(p phase, before, after map[string]workload, apps ...string) untouched {
	r.t.Helper()
	var u untouched
	for _, app := range apps {
		for _, name := range ofApp(before, app) {
			u.workloads++
			b, a := before[name], after[name]
			u.generations += int(a.Generation - b.Generation)
			for _, pod := range b.Pods {
				if !slices.Contains(a.Pods, pod) {
					u.pods++
				}
			}
			if !maps.Equal(a.Records, b.Records) {
				u.records++
			}
			if a.Generation != b.Generation || !maps.Equal(a.Records, b.Records) || !slices.Equal(a.Pods, b.Pods) || !slices.Equal(a.ReplicaSet, b.ReplicaSet) {
				r.t.Errorf("%s: %s changed: generation %d -> %d, records %v -> %v, pods %v -> %v, ReplicaSets %v -> %v",
					p.name, name, b.Generation, a.Generation, b.Records, a.Records, b.Pods, a.Pods, b.ReplicaSet, a.ReplicaSet)
			}
		}
	}
	return u
}

// checkMovedOnce checks that each workload of app moved exactly once
// from before to after: one generation, its pod replaced, the phase's
// secret mounted, its record at its Binding's generation.
func (r *rig) checkMovedOnce(p phase, before, after map[string]workload, app string) {
	r.t.Helper()
	b, err := binding(r.t.Context(), r.dyn, r.ns, app)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, name := range ofApp(before, app) {
		w0, w := before[name], after[name]
		gen, ok := recordedAt(w, boundBy(b))
		if w.Generation != w0.Generation+1 || w.Secret != p.secret || !ok || gen != b.Generation || slices.Equal(w.Pods, w0.Pods) {
			r.t.Errorf("%s: %s did not move once: generation %d -> %d, secret %q (want %q), records %v (want %s at %d), pods %v -> %v",
				p.name, name, w0.Generation, w.Generation, w.Secret, p.secret, w.Records, app, b.Generation, w0.Pods, w.Pods)
		}
	}
}

// checkCreates checks that every Deployment created during the swap was
// bound at admission, by whichever replica the Service reached, and not
// written again by either controller (generation 1: one pod, never
// restarted). It returns how many were.
func (r *rig) checkCreates(p phase, after map[string]workload, created []string, failed int) int {
	r.t.Helper()
	if failed > 0 {
		r.t.Errorf("%s: %d creates failed during the swap", p.name, failed)
	}
	admitted := 0
	for _, name := range created {
		switch w := after[name]; {
		case w.Secret != "github-token":
			r.t.Errorf("%s: %s, created during the swap, is not bound: %+v", p.name, name, w)
		case w.Generation != 1:
			r.t.Errorf("%s: %s, created during the swap, was written again after its create: generation %d, records %v", p.name, name, w.Generation, w.Records)
		default:
			admitted++
		}
	}
	return admitted
}

// deleteUnder deletes the phase's gone Binding under the controller
// swapped in and checks that its subjects are unbound (moved once) and
// that no record of it is left on any workload. It returns how many
// subjects it unbound.
func (r *rig) deleteUnder(p phase) int {
	t, ctx := r.t, r.t.Context()
	b, err := binding(ctx, r.dyn, r.ns, p.gone)
	if err != nil {
		t.Fatal(err)
	}
	before := r.snap()
	if err := r.dyn.Resource(githubBindings).Namespace(r.ns).Delete(ctx, p.gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, waitLimit, p.gone+" deleted and its subjects unbound", func(ctx context.Context) (string, error) {
		if _, err := binding(ctx, r.dyn, r.ns, p.gone); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("%s still there (%v)", p.gone, err), nil
		}
		return settled(ctx, r.kube, r.ns)
	})
	after := r.snap()
	for name, w := range after {
		if duck.Names(w.Records, boundBy(b)) {
			t.Errorf("%s: %s keeps a record of %s, deleted under %s: %v", p.name, name, p.gone, p.to, w.Records)
		}
	}
	names := ofApp(before, p.gone)
	for _, name := range names {
		if w := after[name]; w.Secret != "" || w.Generation != before[name].Generation+1 {
			t.Errorf("%s: %s not unbound once by %s's deletion: generation %d -> %d, secret %q", p.name, name, p.gone, before[name].Generation, w.Generation, w.Secret)
		}
	}
	return len(names)
}

// loadGen creates Deployments a Binding selects (app=load), one a
// second, until stopped: creates during the swap.
type loadGen struct {
	stopCh  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	created []string
	failed  int
}

func startLoad(r *rig, phase string) *loadGen {
	l := &loadGen{stopCh: make(chan struct{})}
	ctx := context.Background()
	l.wg.Go(func() {
		for i := 0; ; i++ {
			name := fmt.Sprintf("load-%s-%02d", phase, i)
			err := createDeployment(ctx, r.kube, r.ns, name, "load")
			l.mu.Lock()
			if err != nil {
				l.failed++
				r.t.Logf("create %s during the swap: %v", name, err)
			} else {
				l.created = append(l.created, name)
			}
			l.mu.Unlock()
			select {
			case <-l.stopCh:
				return
			case <-time.After(time.Second):
			}
		}
	})
	return l
}

func (l *loadGen) stop() ([]string, int) {
	close(l.stopCh)
	l.wg.Wait()
	return l.created, l.failed
}
