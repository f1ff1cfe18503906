package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// bindSizesEnv lists the numbers of Deployments BenchmarkBind binds,
// comma-separated; the default is 1000. BINDKIT_BENCH_BIND_SIZES=1000,10000
// adds the 10,000 run (a few minutes more with the QPS defaults the issue
// asks for, far more at client-go's 5 requests per second).
const bindSizesEnv = "BINDKIT_BENCH_BIND_SIZES"

// Names of the benchmark's Binding and the Secret it mounts.
const (
	bindBindingName = "bind-all"
	bindSecretName  = "github-token"
)

// BenchmarkBind times the path users run (issue 14 part 2): the example
// controller binary (examples/githubbinding/cmd/controller), built here and
// started with default flags, binds n realistic Deployments that one
// selector GithubBinding selects, against the real kube-apiserver; side by
// side with the client-go floor, the same n JSON patches sent by a plain
// client-go loop at the same concurrency (psbinding.DefaultPatchConcurrency),
// unthrottled.
//
// Every iteration creates a namespace with n Deployments and, with the timer
// stopped, starts what it measures: for impl=bindkit a fresh controller
// process, ready (its webhook answers /readyz) but with no Binding to act
// on; for impl=floor the n patches, computed beforehand with bindkit's own
// duck code (bindkitPatch). Both then start an informer on the namespace's
// Deployments (boundWatch). The timer runs from the creation of the
// GithubBinding (bindkit) or the first patch (floor) until the informer has
// seen every Deployment carry the Secret volume and its mounts. Afterwards
// the Deployments and the Binding are deleted and the controller stopped, so
// the next iteration's caches hold only its own Deployments.
//
// Besides sec/op it reports bound/s, client-cpu-s/op (the controller
// process's CPU for bindkit, this process's for the floor, its watch
// included), server-cpu-s/op (etcd and kube-apiserver) and etcd's part of
// it (etcd-cpu-s/op), the requests the
// kube-apiserver counted on deployments by verb (get/op, patch/op) and its
// calls of the webhook (webhook-calls/op), and for bindkit the controller's
// peak resident set over its whole life (peak-rss-B, VmHWM).
//
// With BINDKIT_BENCH_CPUPROFILE=<dir> the controller is the profiled build
// of the same main (cmd/githubbinding-profiled), and each timed part's CPU
// profile of the controller lands in dir, with a CPU profile of the
// kube-apiserver over the first serverProfileSeconds of each timed part,
// floor included.
func BenchmarkBind(b *testing.B) {
	sizes := bindSizes(b)
	env := startControlPlane(b, "../"+demo.CRDPath)
	bb := newBindBench(b, env)
	// The same kind inside a controller-runtime Manager: the kubebuilder
	// example (controllerruntime/examples/githubbinding), side by side
	// (BINDKIT_BENCH_MANAGER=off leaves it out).
	var mb *managerBench
	if os.Getenv("BINDKIT_BENCH_MANAGER") != "off" {
		mb = newManagerBench(b, env)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d/impl=floor", n), func(b *testing.B) { bb.floor(b, n) })
		b.Run(fmt.Sprintf("n=%d/impl=bindkit", n), func(b *testing.B) { bb.bindkit(b, n) })
		if mb != nil {
			b.Run(fmt.Sprintf("n=%d/impl=manager", n), func(b *testing.B) { bb.bindWith(b, n, mb.start, managerWebhookConfiguration) })
		}
	}
}

func bindSizes(tb testing.TB) []int {
	tb.Helper()
	v := os.Getenv(bindSizesEnv)
	if v == "" {
		return []int{1000}
	}
	var out []int
	for part := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			tb.Fatalf("%s=%q: want positive numbers, comma-separated", bindSizesEnv, v)
		}
		out = append(out, n)
	}
	return out
}

type bindBench struct {
	env        *testenv.Environment
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	binary     string
	profileDir string
}

// newBindBench builds the example controller (the profiled build when
// BINDKIT_BENCH_CPUPROFILE is set) and creates its system namespace on env
// (each controller it starts points the webhook configuration at its own
// port: startController): what BenchmarkBind and BenchmarkManyBindings
// share.
func newBindBench(b *testing.B, env *testenv.Environment) *bindBench {
	bb := &bindBench{
		env:        env,
		kube:       kubernetes.NewForConfigOrDie(env.Config),
		dyn:        dynamic.NewForConfigOrDie(env.Config),
		profileDir: os.Getenv(cpuProfileEnv),
	}
	if bb.profileDir != "" {
		bb.binary = buildBinary(b, profiledPackage)
	} else {
		bb.binary = buildBinary(b, controllerPackage)
	}
	createSystemNamespace(b, bb.kube)
	return bb
}

// etcdCPU is etcd's share of the server's CPU time so far.
func (bb *bindBench) etcdCPU() time.Duration { return pidsCPU(bb.env.PIDs()[:1]) }

// bindTimeout bounds the wait for n subjects: generous enough for
// client-go's default 5 requests per second (two requests per subject).
func bindTimeout(n int) time.Duration { return 5*time.Minute + time.Duration(n)*600*time.Millisecond }

// setup makes a namespace with the Secret and n Deployments, all labelled
// tier=backend, with the timer stopped.
func (bb *bindBench) setup(b *testing.B, prefix string, n int) (string, []*appsv1.Deployment) {
	b.Helper()
	ctx := context.Background()
	ns := bb.env.CreateNamespace(b, prefix)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bindSecretName},
		StringData: map[string]string{"token": "not-a-real-token"},
	}
	if _, err := bb.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create secret %s/%s: %v", ns, bindSecretName, err)
	}
	start := time.Now()
	deps, err := createDeployments(ctx, bb.kube, ns, n, 16, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d Deployments in %s", n, time.Since(start).Round(100*time.Millisecond))
	return ns, deps
}

// githubDo is the example Binding's Do, as the floor's patches apply it.
func githubDo(wp *duck.WithPod) {
	gb := &v1alpha1.GithubBinding{Spec: v1alpha1.GithubBindingSpec{Secret: corev1.LocalObjectReference{Name: bindSecretName}}}
	gb.Do(context.Background(), wp)
}

// runMetrics adds up what the iterations of one sub-benchmark cost.
type runMetrics struct {
	client, server, etcd time.Duration
	requests             requestCounts
	peak                 uint64
}

func (m *runMetrics) report(b *testing.B, n int) {
	if secs := b.Elapsed().Seconds(); secs > 0 {
		b.ReportMetric(float64(n*b.N)/secs, "bound/s")
	}
	b.ReportMetric(m.client.Seconds()/float64(b.N), "client-cpu-s/op")
	b.ReportMetric(m.server.Seconds()/float64(b.N), "server-cpu-s/op")
	b.ReportMetric(m.etcd.Seconds()/float64(b.N), "etcd-cpu-s/op")
	b.ReportMetric(m.requests["GET"]/float64(b.N), "get/op")
	b.ReportMetric(m.requests["PATCH"]/float64(b.N), "patch/op")
	b.ReportMetric(m.requests["webhook"]/float64(b.N), "webhook-calls/op")
	if m.peak > 0 {
		b.ReportMetric(float64(m.peak), "peak-rss-B")
	}
}

func (m *runMetrics) addRequests(c requestCounts) {
	if m.requests == nil {
		m.requests = requestCounts{}
	}
	for k, v := range c {
		m.requests[k] += v
	}
}

// floor sends the n patches from this process, unthrottled.
func (bb *bindBench) floor(b *testing.B, n int) {
	ctx := context.Background()
	by := duck.BoundBy{Resource: v1alpha1.GroupVersionResource().GroupResource(), Name: bindBindingName}
	var m runMetrics
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		ns, deps := bb.setup(b, "bind-floor-", n)
		// A Binding's generation starts at 1: the record the controller
		// writes names the same generation.
		patches, err := bindkitPatches(deps, githubDo, by, 1)
		if err != nil {
			b.Fatal(err)
		}
		w := watchBound(b, bb.kube, ns, n, githubBound)
		before := readRequestCounts(b, bb.kube)
		c0, s0, e0 := selfCPU(), pidsCPU(bb.env.PIDs()), bb.etcdCPU()
		serverProfile := bb.profileServer(b, fmt.Sprintf("apiserver-floor-n%d-%d.prof", n, time.Now().Unix()), serverProfileSeconds)
		b.StartTimer()

		if err := sendPatches(ctx, bb.kube, patches, psbinding.DefaultPatchConcurrency); err != nil {
			b.Fatal(err)
		}
		err = w.wait(bindTimeout(n), nil)

		b.StopTimer()
		m.client += selfCPU() - c0
		m.server += pidsCPU(bb.env.PIDs()) - s0
		m.etcd += bb.etcdCPU() - e0
		m.addRequests(readRequestCounts(b, bb.kube).sub(before))
		if err != nil {
			b.Fatalf("floor in %s: %v", ns, err)
		}
		serverProfile()
		w.close()
		deleteDeployments(b, bb.kube, ns)
		b.StartTimer()
	}
	m.report(b, n)
}

// bindkit creates one selector GithubBinding and lets a fresh controller
// process bind the n Deployments.
func (bb *bindBench) bindkit(b *testing.B, n int) {
	start := func(b *testing.B, extraEnv ...string) *process {
		return startController(b, bb.env, bb.binary, extraEnv...)
	}
	bb.bindWith(b, n, start, githubbinding.WebhookConfigurationName)
}

// bindWith creates one selector GithubBinding and lets a fresh process
// that start starts bind the n Deployments; configuration is the webhook
// configuration that process programs.
func (bb *bindBench) bindWith(b *testing.B, n int, start func(b *testing.B, extraEnv ...string) *process, configuration string) {
	ctx := context.Background()
	bindings := bb.dyn.Resource(v1alpha1.GroupVersionResource())
	var m runMetrics
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ns, _ := bb.setup(b, "bind-bindkit-", n)
		var profile string
		var extraEnv []string
		if bb.profileDir != "" {
			profile = filepath.Join(bb.profileDir, fmt.Sprintf("controller-n%d-%d-%d.prof", n, time.Now().Unix(), i))
			extraEnv = append(extraEnv, "BINDKIT_CPUPROFILE="+profile)
		}
		ctrl := start(b, extraEnv...)
		w := watchBound(b, bb.kube, ns, n, githubBound)
		binding := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": "GithubBinding",
			"metadata": map[string]any{"namespace": ns, "name": bindBindingName},
			"spec": map[string]any{
				"subject": map[string]any{
					"apiVersion": "apps/v1", "kind": "Deployment",
					"selector": map[string]any{"matchLabels": map[string]any{"tier": "backend"}},
				},
				"secret": map[string]any{"name": bindSecretName},
			},
		}}
		before := readRequestCounts(b, bb.kube)
		c0, s0, e0 := ctrl.cpu(), pidsCPU(bb.env.PIDs()), bb.etcdCPU()
		serverProfile := func() {}
		if profile != "" {
			toggleProfile(b, ctrl)
			serverProfile = bb.profileServer(b, fmt.Sprintf("apiserver-bindkit-n%d-%d.prof", n, time.Now().Unix()), serverProfileSeconds)
		}
		b.StartTimer()

		if _, err := bindings.Namespace(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create GithubBinding %s/%s: %v", ns, bindBindingName, err)
		}
		err := w.wait(bindTimeout(n), ctrl.exited)

		b.StopTimer()
		m.client += ctrl.cpu() - c0
		m.server += pidsCPU(bb.env.PIDs()) - s0
		m.etcd += bb.etcdCPU() - e0
		m.addRequests(readRequestCounts(b, bb.kube).sub(before))
		if profile != "" {
			toggleProfile(b, ctrl)
			waitProfile(b, profile)
			serverProfile()
		}
		if err != nil {
			b.Fatalf("bindkit in %s: %v\ncontroller log:\n%s", ns, err, ctrl.logTail())
		}
		m.peak = max(m.peak, ctrl.memory(b).hwm)
		w.close()
		bb.teardown(b, ns, ctrl, configuration)
		b.StartTimer()
	}
	m.report(b, n)
}

// teardown deletes the Deployments (first, so the controller has nothing
// to unbind), then the Binding, waits for the controller to let it go and
// to take the rules out of the webhook configuration, and stops the
// controller.
func (bb *bindBench) teardown(b *testing.B, ns string, ctrl *process, configuration string) {
	b.Helper()
	deleteDeployments(b, bb.kube, ns)
	bindings := bb.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns)
	if err := bindings.Delete(context.Background(), bindBindingName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatalf("delete GithubBinding %s/%s: %v", ns, bindBindingName, err)
	}
	poll(b, 5*time.Minute, "GithubBinding "+ns+"/"+bindBindingName+" gone", func() (bool, error) {
		if err := ctrl.exited(); err != nil {
			return false, err
		}
		_, err := bindings.Get(context.Background(), bindBindingName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitWebhookIdleNamed(b, bb.kube, configuration)
	ctrl.stop(b)
}

// toggleProfile asks the profiled controller to start, or stop and write,
// its CPU profile.
func toggleProfile(b *testing.B, ctrl *process) {
	b.Helper()
	if err := ctrl.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.Fatalf("SIGUSR1 to the controller: %v", err)
	}
}

// serverProfileSeconds is how much of a timed part the kube-apiserver's CPU
// profile covers, from its start: less than the shortest timed part, so
// that nothing after it is sampled.
const serverProfileSeconds = 3

// profileServer starts, when profiling, a CPU profile of the kube-apiserver
// (its /debug/pprof/profile) over the first seconds of the timed part
// (serverProfileSeconds for BenchmarkBind) and returns a function that
// waits for it and writes it to name in the profile directory.
func (bb *bindBench) profileServer(b *testing.B, name string, seconds int) (wait func()) {
	if bb.profileDir == "" {
		return func() {}
	}
	done := make(chan error, 1)
	go func() {
		raw, err := bb.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(filepath.Join(bb.profileDir, name), raw, 0o600)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			b.Fatalf("kube-apiserver CPU profile: %v", err)
		}
		b.Logf("kube-apiserver CPU profile: %s", filepath.Join(bb.profileDir, name))
	}
}

// waitProfile waits for the profiled controller to have written profile.
func waitProfile(b *testing.B, profile string) {
	b.Helper()
	poll(b, time.Minute, "CPU profile "+profile, func() (bool, error) {
		_, err := os.Stat(profile + ".done")
		return err == nil, nil
	})
	b.Logf("controller CPU profile: %s", profile)
}
