package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/fixtures"
)

// scaleEnv turns BenchmarkScale on and says how many Deployments it
// creates: BINDKIT_BENCH_SCALE=50000 is the size,
// BINDKIT_BENCH_SCALE=2000 a try of a few minutes. Unset, the benchmark
// skips, so `make bench` and CI never run it.
const scaleEnv = "BINDKIT_BENCH_SCALE"

// The shape of every namespace of BenchmarkScale.
const (
	// scalePerNamespace is how many Deployments each namespace holds.
	scalePerNamespace = 100
	// scaleWorkers is how many creators make the Deployments, unthrottled.
	scaleWorkers = 32
	// scaleRebuilds is how many Binding edits the admission index's rebuild
	// is timed over.
	scaleRebuilds = 5
	// scaleCreates is how many Deployments the create latency is taken
	// over, with the webhook and without it each.
	scaleCreates = 200
)

// BenchmarkScale is issue 40 item 4, "Scale, measured": n Deployments (the
// realistic fixture) over n/100 namespaces, each namespace with one Secret
// and 4 GithubBindings (n/25 in all): sel-a and sel-b select the
// Deployments labelled group=a and group=b (49 each), name-0 and name-1
// name d-00000 and d-00001 (labelled group=named, which no selector
// selects), so every Deployment is bound by exactly one Binding. It is
// opt-in (scaleEnv, unset: skipped) and runs its parts once each, in
// order, on one control plane (etcd and kube-apiserver as startControlPlane
// starts them, no kube-controller-manager: the bind is the template
// patch); run it with -benchtime 1x and a long -timeout.
//
//   - impl=floor: n Deployments created by scaleWorkers creators (untimed,
//     logged); timed from the first Binding's create (no controller runs,
//     nothing acts on them) through the n JSON patches bindkit would send,
//     computed beforehand with bindkit's duck code, sent at
//     psbinding.DefaultPatchConcurrency, until an informer over all
//     Deployments has seen each one bound (githubBound). Then the
//     Deployments and Bindings are deleted.
//   - impl=bindkit: the same n Deployments created again, the example
//     binary started with default flags and ready (its webhook answers; it
//     lists Deployments only once a Binding names them, so inside the
//     timed part); timed from the first of the same Bindings' create until
//     the informer has seen every Deployment bound. Reports the
//     controller's CPU and its peak RSS (VmHWM).
//   - index-rebuild: with the controller still running, sel-a of a
//     namespace gets a new Secret name, timed from the update until a
//     server-side dry-run create of a group=a Deployment there, sent every
//     5 ms, comes back with the new name: the admission index rebuilt after
//     one Binding change. scaleRebuilds edits, each in its own namespace
//     once the controller has settled the previous one; the median
//     (rebuild-p50-ms) and the slowest (rebuild-p99-ms).
//   - create-latency: scaleCreates sequential creates of a group=a
//     Deployment in a namespace holding Bindings (the webhook in the path,
//     n objects in the controller's caches), interleaved with as many in a
//     namespace without any Binding (which the webhook configuration does
//     not select: no bindkit), p50 and p99 of each.
//
// With BINDKIT_BENCH_CPUPROFILE=<dir> the controller is the profiled build
// and the CPU profile of its timed bind lands in dir, with a CPU profile
// of the kube-apiserver over the first scaleServerProfileSeconds of each
// bind, floor included.
func BenchmarkScale(b *testing.B) {
	n := scaleSize(b)
	env := startControlPlane(b, "../"+demo.CRDPath)
	sb := &scaleBench{bindBench: *newBindBench(b, env), n: n}
	sb.createNamespaces(b)
	b.Cleanup(func() {
		if sb.ctrl != nil {
			sb.ctrl.stop(b)
		}
	})
	prefix := fmt.Sprintf("n=%d/", n)
	for _, part := range []struct {
		name string
		run  func(*testing.B)
	}{
		{"impl=floor", sb.floor},
		{"impl=bindkit", sb.bindkit},
		{"index-rebuild", sb.indexRebuild},
		{"create-latency", sb.createLatency},
	} {
		if !b.Run(prefix+part.name, func(b *testing.B) {
			if b.N != 1 {
				b.Fatalf("BenchmarkScale runs each part once: use -benchtime 1x (b.N=%d)", b.N)
			}
			part.run(b)
		}) {
			return
		}
	}
}

// scaleSize reads scaleEnv: a positive multiple of scalePerNamespace, or
// skip when unset.
func scaleSize(b *testing.B) int {
	v := os.Getenv(scaleEnv)
	if v == "" {
		b.Skipf("opt-in: set %s=50000 (or a smaller multiple of %d) to run it", scaleEnv, scalePerNamespace)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < scalePerNamespace || n%scalePerNamespace != 0 {
		b.Fatalf("%s=%q: want a positive multiple of %d", scaleEnv, v, scalePerNamespace)
	}
	return n
}

// scaleServerProfileSeconds is how much of each bind the kube-apiserver's
// CPU profile covers when profiling, from its start: less than the bind
// takes at 5,000 Deployments and more, so both sides are sampled alike.
const scaleServerProfileSeconds = 20

// scaleBench is the state BenchmarkScale's parts share, in order.
type scaleBench struct {
	bindBench
	n          int
	namespaces []string
	// ctrl is the controller impl=bindkit started; the later parts use it.
	ctrl *process
}

// createNamespaces makes the n/100 namespaces, each with the Secret.
func (sb *scaleBench) createNamespaces(b *testing.B) {
	b.Helper()
	for range sb.n / scalePerNamespace {
		sb.namespaces = append(sb.namespaces, sb.env.CreateNamespace(b, "scale-"))
	}
	err := forEach(sb.namespaces, scaleWorkers, func(ns string) error {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bindSecretName}, StringData: map[string]string{"token": "not-a-real-token"}}
		_, err := sb.kube.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// scaleBindingOf is the Binding that binds the i-th Deployment of a
// namespace, and the group label that Deployment carries.
func scaleBindingOf(i int) (binding, group string) {
	switch {
	case i < 2:
		return fmt.Sprintf("name-%d", i), "named"
	case i%2 == 0:
		return "sel-a", "a"
	default:
		return "sel-b", "b"
	}
}

// scaleDeployment is the realistic fixture named d-<i>, labelled group.
func scaleDeployment(ns string, i int, group string) *appsv1.Deployment {
	d := fixtures.RealisticDeployment(ns, fmt.Sprintf("d-%05d", i))
	d.Labels["group"] = group // the template shares the map
	return d
}

// scaleBindings are the 4 GithubBindings of ns.
func scaleBindings(ns string) []*unstructured.Unstructured {
	sel := func(group string) map[string]any {
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"selector": map[string]any{"matchLabels": map[string]any{"group": group}}}
	}
	named := func(i int) map[string]any {
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": fmt.Sprintf("d-%05d", i)}
	}
	var out []*unstructured.Unstructured
	for _, s := range []struct {
		name    string
		subject map[string]any
	}{{"sel-a", sel("a")}, {"sel-b", sel("b")}, {"name-0", named(0)}, {"name-1", named(1)}} {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": "GithubBinding",
			"metadata": map[string]any{"namespace": ns, "name": s.name},
			"spec":     map[string]any{"subject": s.subject, "secret": map[string]any{"name": bindSecretName}},
		}})
	}
	return out
}

// createDeployments creates the n Deployments with scaleWorkers creators
// and hands each, as the server stored it, to keep (which may be nil).
func (sb *scaleBench) createDeployments(b *testing.B, keep func(*appsv1.Deployment) error) {
	b.Helper()
	type item struct {
		ns string
		i  int
	}
	items := make([]item, 0, sb.n)
	for _, ns := range sb.namespaces {
		for i := range scalePerNamespace {
			items = append(items, item{ns, i})
		}
	}
	start := time.Now()
	err := forEach(items, scaleWorkers, func(it item) error {
		_, group := scaleBindingOf(it.i)
		got, err := createWithRetry(context.Background(), sb.kube, scaleDeployment(it.ns, it.i, group))
		if err != nil || keep == nil {
			return err
		}
		return keep(got)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d Deployments in %d namespaces with %d creators in %s", sb.n, len(sb.namespaces), scaleWorkers, time.Since(start).Round(100*time.Millisecond))
}

// createBindings creates every namespace's 4 Bindings,
// psbinding.DefaultPatchConcurrency at a time.
func (sb *scaleBench) createBindings(ctx context.Context) error {
	var all []*unstructured.Unstructured
	for _, ns := range sb.namespaces {
		all = append(all, scaleBindings(ns)...)
	}
	bindings := sb.dyn.Resource(v1alpha1.GroupVersionResource())
	return forEach(all, psbinding.DefaultPatchConcurrency, func(u *unstructured.Unstructured) error {
		_, err := bindings.Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create GithubBinding %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		return nil
	})
}

// floor creates the Bindings with no controller running and sends the n
// patches bindkit would send from this process.
func (sb *scaleBench) floor(b *testing.B) {
	ctx := context.Background()
	gr := v1alpha1.GroupVersionResource().GroupResource()
	var (
		mu      sync.Mutex
		patches []floorPatch
	)
	sb.createDeployments(b, func(d *appsv1.Deployment) error {
		var i int
		if _, err := fmt.Sscanf(d.Name, "d-%05d", &i); err != nil {
			return fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		binding, _ := scaleBindingOf(i)
		// A Binding's generation starts at 1: the record the controller
		// writes names the same generation.
		p, err := bindkitPatch(d, githubDo, duck.BoundBy{Resource: gr, Name: binding}, 1)
		mu.Lock()
		patches = append(patches, p)
		mu.Unlock()
		return err
	})
	w := watchBoundAll(b, sb.kube, sb.namespaces, sb.n)
	var m runMetrics
	before := readRequestCounts(b, sb.kube)
	c0, s0, e0 := selfCPU(), pidsCPU(sb.env.PIDs()), sb.etcdCPU()
	serverProfile := sb.profileServer(b, fmt.Sprintf("apiserver-scale-floor-n%d-%d.prof", sb.n, time.Now().Unix()), scaleServerProfileSeconds)
	b.ResetTimer()

	err := sb.createBindings(ctx)
	if err == nil {
		err = sendPatches(ctx, sb.kube, patches, psbinding.DefaultPatchConcurrency)
	}
	if err == nil {
		err = w.wait(bindTimeout(sb.n), nil)
	}

	b.StopTimer()
	serverProfile()
	m.client += selfCPU() - c0
	m.server += pidsCPU(sb.env.PIDs()) - s0
	m.etcd += sb.etcdCPU() - e0
	m.addRequests(readRequestCounts(b, sb.kube).sub(before))
	if err != nil {
		b.Fatalf("floor: %v", err)
	}
	w.close()
	m.report(b, sb.n)
	sb.deleteAll(b)
}

// deleteAll deletes every Deployment and Binding of the namespaces (no
// controller runs: the Bindings carry no finalizer) and waits until none
// is left, so the controller started next caches only its own n.
func (sb *scaleBench) deleteAll(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	bindings := sb.dyn.Resource(v1alpha1.GroupVersionResource())
	err := forEach(sb.namespaces, psbinding.DefaultPatchConcurrency, func(ns string) error {
		for range 100 {
			_ = sb.kube.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			_ = bindings.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			deps, err := sb.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			bs, err := bindings.Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			if len(deps.Items) == 0 && len(bs.Items) == 0 {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("namespace %s: Deployments or Bindings left after 100 deletes", ns)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("deleted %d Deployments and their Bindings in %s", sb.n, time.Since(start).Round(100*time.Millisecond))
}

// bindkit creates the same Deployments again, starts the controller and
// times the bind of all from the first Binding's create.
func (sb *scaleBench) bindkit(b *testing.B) {
	ctx := context.Background()
	sb.createDeployments(b, nil)
	var profile string
	var extraEnv []string
	if sb.profileDir != "" {
		profile = filepath.Join(sb.profileDir, fmt.Sprintf("controller-scale-n%d-%d.prof", sb.n, time.Now().Unix()))
		extraEnv = append(extraEnv, "BINDKIT_CPUPROFILE="+profile)
	}
	start := time.Now()
	sb.ctrl = startController(b, sb.env, sb.binary, extraEnv...)
	b.Logf("controller ready in %s, resident %d MiB", time.Since(start).Round(100*time.Millisecond), sb.ctrl.memory(b).rss>>20)
	w := watchBoundAll(b, sb.kube, sb.namespaces, sb.n)
	var m runMetrics
	before := readRequestCounts(b, sb.kube)
	c0, s0, e0 := sb.ctrl.cpu(), pidsCPU(sb.env.PIDs()), sb.etcdCPU()
	if profile != "" {
		toggleProfile(b, sb.ctrl)
	}
	serverProfile := sb.profileServer(b, fmt.Sprintf("apiserver-scale-bindkit-n%d-%d.prof", sb.n, time.Now().Unix()), scaleServerProfileSeconds)
	b.ResetTimer()

	err := sb.createBindings(ctx)
	if err == nil {
		err = w.wait(bindTimeout(sb.n), sb.ctrl.exited)
	}

	b.StopTimer()
	serverProfile()
	m.client += sb.ctrl.cpu() - c0
	m.server += pidsCPU(sb.env.PIDs()) - s0
	m.etcd += sb.etcdCPU() - e0
	m.addRequests(readRequestCounts(b, sb.kube).sub(before))
	if profile != "" {
		toggleProfile(b, sb.ctrl)
		waitProfile(b, profile)
	}
	if err != nil {
		b.Fatalf("bindkit: %v\ncontroller log:\n%s", err, sb.ctrl.logTail())
	}
	w.close()
	m.peak = sb.ctrl.memory(b).hwm
	m.report(b, sb.n)
}

// watchBoundAll is watchBound over every namespace of namespaces at once:
// one informer on all Deployments, which keeps of each only what
// githubBound reads (so n realistic Deployments cost this process little),
// returned once it holds want Deployments there, none bound.
func watchBoundAll(tb testing.TB, kube kubernetes.Interface, namespaces []string, want int) *boundWatch {
	tb.Helper()
	ours := make(map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		ours[ns] = true
	}
	w := &boundWatch{want: want, isBound: githubBound, stop: make(chan struct{}), bound: map[string]bool{}, all: make(chan struct{})}
	inf := informers.NewSharedInformerFactory(kube, 0).Apps().V1().Deployments().Informer()
	if err := inf.SetTransform(slimDeployment); err != nil {
		tb.Fatal(err)
	}
	see := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok && ours[d.Namespace] && w.isBound(d) {
			w.mark(d.Namespace + "/" + d.Name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }}); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(w.stop) }()
	tb.Cleanup(func() { w.close(); <-done })
	if !cache.WaitForCacheSync(w.stop, inf.HasSynced) {
		tb.Fatal("watch of Deployments did not sync")
	}
	held := 0
	for _, key := range inf.GetStore().ListKeys() {
		if ns, _, _ := cache.SplitMetaNamespaceKey(key); ours[ns] {
			held++
		}
	}
	if held != want || w.count() != 0 {
		tb.Fatalf("the namespaces hold %d Deployments (want %d), %d bound before the benchmark began", held, want, w.count())
	}
	return w
}

// slimDeployment keeps of a Deployment its name and what githubBound reads.
func slimDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	slim := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name, ResourceVersion: d.ResourceVersion}}
	spec := &d.Spec.Template.Spec
	slim.Spec.Template.Spec.Volumes = spec.Volumes
	for _, c := range spec.InitContainers {
		slim.Spec.Template.Spec.InitContainers = append(slim.Spec.Template.Spec.InitContainers, corev1.Container{Name: c.Name, VolumeMounts: c.VolumeMounts})
	}
	for _, c := range spec.Containers {
		slim.Spec.Template.Spec.Containers = append(slim.Spec.Template.Spec.Containers, corev1.Container{Name: c.Name, VolumeMounts: c.VolumeMounts})
	}
	return slim, nil
}

// indexRebuild edits sel-a of scaleRebuilds namespaces in turn, a new
// Secret name each, and times until admission answers with it.
func (sb *scaleBench) indexRebuild(b *testing.B) {
	if sb.ctrl == nil {
		b.Skip("needs impl=bindkit's controller")
	}
	var took []time.Duration
	for r := range scaleRebuilds {
		ns := sb.namespaces[r%len(sb.namespaces)]
		took = append(took, sb.rebuildOnce(b, ns, fmt.Sprintf("%s-r%d", bindSecretName, r)))
	}
	b.Logf("admission index rebuilds: %v", took)
	// Of scaleRebuilds samples, the p99 is the slowest.
	reportLatencies(b, "rebuild", took)
}

// rebuildOnce points ns's sel-a at secret and returns the time from the
// update until a dry-run create of a group=a Deployment in ns, sent every
// 5 ms, comes back mounting secret; then it waits, untimed, until the
// controller has made the Binding Ready for its new generation.
func (sb *scaleBench) rebuildOnce(b *testing.B, ns, secret string) time.Duration {
	b.Helper()
	ctx := context.Background()
	bindings := sb.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns)
	u, err := bindings.Get(ctx, "sel-a", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	old, _, _ := unstructured.NestedString(u.Object, "spec", "secret", "name")
	if got := sb.dryRunSecret(b, ns); got != old {
		b.Fatalf("before the edit, a dry-run create in %s mounts %q, want %q", ns, got, old)
	}
	if err := unstructured.SetNestedField(u.Object, secret, "spec", "secret", "name"); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if u, err = bindings.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		b.Fatalf("update GithubBinding %s/sel-a: %v", ns, err)
	}
	for sb.dryRunSecret(b, ns) != secret {
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("admission in %s still mounts the old Secret 2 minutes after the edit", ns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	gen := u.GetGeneration()
	poll(b, 5*time.Minute, "GithubBinding "+ns+"/sel-a Ready", func() (bool, error) {
		got, err := bindings.Get(ctx, "sel-a", metav1.GetOptions{})
		return err == nil && got.GetGeneration() == gen && bindingReady(got), sb.ctrl.exited()
	})
	return took
}

// dryRunSecret sends a server-side dry-run create of a group=a Deployment
// to ns and returns the Secret its github-binding volume mounts, "" if none.
func (sb *scaleBench) dryRunSecret(b *testing.B, ns string) string {
	b.Helper()
	d := scaleDeployment(ns, 0, "a")
	d.Name = "rebuild-probe"
	got, err := sb.kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		b.Fatalf("dry-run create in %s: %v", ns, err)
	}
	for _, v := range got.Spec.Template.Spec.Volumes {
		if v.Name == v1alpha1.VolumeName && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

// createLatency times scaleCreates creates of a group=a Deployment in a
// namespace holding Bindings (the webhook binds it), interleaved with as
// many in a namespace without one, which the webhook configuration does
// not select.
func (sb *scaleBench) createLatency(b *testing.B) {
	if sb.ctrl == nil {
		b.Skip("needs impl=bindkit's controller")
	}
	ctx := context.Background()
	on := sb.namespaces[len(sb.namespaces)-1]
	off := sb.env.CreateNamespace(b, "scale-nobinding-")
	before := readRequestCounts(b, sb.kube)
	var withWebhook, without []time.Duration
	for i := range scaleCreates {
		for _, ns := range []string{off, on} {
			d := scaleDeployment(ns, 0, "a")
			d.Name = fmt.Sprintf("latency-%03d", i)
			start := time.Now()
			got, err := sb.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			took := time.Since(start)
			if err != nil {
				b.Fatalf("create %s/%s: %v", ns, d.Name, err)
			}
			if bound := githubBound(got); bound != (ns == on) {
				b.Fatalf("create %s/%s: bound %v at admission", ns, d.Name, bound)
			}
			if ns == on {
				withWebhook = append(withWebhook, took)
			} else {
				without = append(without, took)
			}
		}
	}
	b.StopTimer()
	reportLatencies(b, "create-bindkit", withWebhook)
	reportLatencies(b, "create-nobindkit", without)
	b.ReportMetric(readRequestCounts(b, sb.kube).sub(before)["webhook"], "webhook-calls")
	b.ReportMetric(float64(sb.ctrl.memory(b).hwm), "peak-rss-B")
	if err := sb.ctrl.exited(); err != nil {
		b.Fatal(err)
	}
}
