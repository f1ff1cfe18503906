package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/demo"
)

// TestReadLocalInstall: of config/, a local run installs the namespace,
// the CRD, the admission policies and the webhook configuration, pointed
// at 127.0.0.1 on the Service's path, and nothing of the controller's own
// Deployment, Service, Secret or RBAC.
func TestReadLocalInstall(t *testing.T) {
	in, err := readLocalInstall("../../config", 8443)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range in.objects {
		kinds = append(kinds, o.GetKind()+" "+o.GetName())
		if o.GetKind() == "MutatingWebhookConfiguration" {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				u, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "url")
				if u != "https://127.0.0.1:8443/githubbindings" {
					t.Errorf("webhook URL %q, want https://127.0.0.1:8443/githubbindings", u)
				}
				if _, ok, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service"); ok {
					t.Errorf("webhook still names its Service")
				}
			}
		}
	}
	want := []string{
		"Namespace bindkit-system",
		"CustomResourceDefinition githubbindings.bindings.bindkit.dev",
		"ValidatingAdmissionPolicy authority.githubbindings.bindings.bindkit.dev",
		"ValidatingAdmissionPolicyBinding authority.githubbindings.bindings.bindkit.dev",
		"ValidatingAdmissionPolicy namespace-guard.githubbindings.bindings.bindkit.dev",
		"ValidatingAdmissionPolicyBinding namespace-guard.githubbindings.bindings.bindkit.dev",
		"MutatingAdmissionPolicy requested-by.githubbindings.bindings.bindkit.dev",
		"MutatingAdmissionPolicyBinding requested-by.githubbindings.bindings.bindkit.dev",
		"MutatingWebhookConfiguration githubbindings.webhook.bindkit.dev",
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("installed (-want +got):\n%s", diff)
	}
	if in.systemNamespace != "bindkit-system" {
		t.Errorf("system namespace %q, want bindkit-system", in.systemNamespace)
	}
	if _, err := readLocalInstall(t.TempDir(), 8443); err == nil || !strings.Contains(err.Error(), "no YAML file") {
		t.Errorf("an empty directory: got %v, want an error naming it", err)
	}
}

// TestControlPlaneRunsAControllerLocallyWithRealAPIServer follows the
// local-run recipe as an author does: `bindkit controlplane -run` with a
// kind's config/, then the controller started with exactly the
// environment and flags it prints; a Deployment is bound by the
// reconciler and one created later by the webhook, which the
// kube-apiserver calls on 127.0.0.1. Ctrl-C (the context) stops it all.
func TestControlPlaneRunsAControllerLocallyWithRealAPIServer(t *testing.T) {
	t.Parallel() // a control plane and a controller's build: beside the scaffolding tests
	assets := os.Getenv(envtest.BinDirEnv)
	if assets == "" || len(missingBinaries(assets)) > 0 || !isExecutable(filepath.Join(assets, "kwok")) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s=%q lacks the newest minor's binaries (make tools)", envtest.BinDirEnv, assets)
		}
		t.Skipf("no built binaries in %s=%q (make tools)", envtest.BinDirEnv, assets)
	}
	port, err := envtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cp := startControlPlaneRun(t, ctx, assets, "-run", "-config", "../../config", "-webhook-port", itoa(port))
	out, err := cp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Ctrl-C, as the author stops it; killed if still running a
		// minute later.
		_ = cp.Process.Signal(os.Interrupt)
		kill := time.AfterFunc(time.Minute, cancel)
		defer kill.Stop()
		if err := cp.Wait(); err != nil {
			t.Errorf("bindkit controlplane -run, after Ctrl-C: %v (stopped within a minute, else killed)", err)
		}
	}()
	began := time.Now()
	kubeconfig, command := readInstructions(t, out)
	t.Logf("instructions after %s", time.Since(began))

	// The controller, as printed: its environment, then its flags.
	fields := strings.Fields(command)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "SYSTEM_NAMESPACE=") || fields[1] != "go" || fields[2] != "run" {
		t.Fatalf("printed command %q: want SYSTEM_NAMESPACE=... go run ./cmd/controller flags...", command)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(t.TempDir(), "githubbinding-controller")
	if err := demo.BuildController(ctx, root, binary); err != nil {
		t.Fatal(err)
	}
	t.Logf("controller built after %s", time.Since(began))
	ctrl := exec.CommandContext(ctx, binary, fields[4:]...)
	ctrl.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, fields[0])
	logs := &strings.Builder{}
	ctrl.Stdout, ctrl.Stderr = logs, logs
	if err := ctrl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = ctrl.Process.Signal(os.Interrupt)
		_ = ctrl.Wait()
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	}()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	ns := "local-run"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	deployment := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}},
		}}
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": "gh"},
		"spec": map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
			"secret":  map[string]any{"name": "token"},
		},
	}}
	if _, err := dynamic.NewForConfigOrDie(cfg).Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(ctx, gh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mounted := func(d *appsv1.Deployment) bool { return len(d.Spec.Template.Spec.Volumes) > 0 }
	waitFor(t, "the reconciler to bind Deployment web", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && mounted(d), nil
	})
	t.Logf("bound by the reconciler after %s", time.Since(began))
	waitFor(t, "the webhook, on 127.0.0.1, to bind a Deployment as it is created", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("later"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsInternalError(err) {
			return false, nil // the webhook's certificate not yet trusted
		}
		return err == nil && mounted(d), nil
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

// startControlPlaneRun returns `bindkit controlplane ARGS...` as an author
// runs it, a process of a binary built from this package, with the
// control plane's binaries in KUBEBUILDER_ASSETS and a home and caches of
// its own (so that it can find no other binaries). A process, not run in
// this one: the environment it needs is its own, and setting it here
// (t.Setenv) would keep this test from running beside the others and
// hand the controller's build a cold Go build cache. It is killed when
// ctx ends.
func startControlPlaneRun(t *testing.T, ctx context.Context, assets string, args ...string) *exec.Cmd {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "bindkit")
	runOrFail(t, "", nil, "go", "build", "-o", binary, ".")
	cmd := exec.CommandContext(ctx, binary, append([]string{"controlplane"}, args...)...)
	cmd.Env = append(os.Environ(),
		"HOME="+t.TempDir(), "XDG_CACHE_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir(),
		envtest.KubebuilderAssetsEnv+"="+assets)
	cmd.Stderr = &testWriter{t: t}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// testWriter logs what is written to it, a line at a time.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// readInstructions reads the output of `controlplane -run` until it has
// printed the kubeconfig and the controller's command.
func readInstructions(t *testing.T, out io.Reader) (kubeconfig, command string) {
	t.Helper()
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	exportLine := regexp.MustCompile(`^\s+export KUBECONFIG=(\S+)$`)
	var seen []string
	timeout := time.After(3 * time.Minute)
	for kubeconfig == "" || command == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("bindkit controlplane -run ended before its instructions:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if m := exportLine.FindStringSubmatch(l); m != nil {
				kubeconfig = m[1]
			}
			if strings.Contains(l, " go run ./cmd/controller ") {
				command = strings.TrimSpace(l)
			}
		case <-timeout:
			t.Fatalf("no instructions within 3 minutes:\n%s", strings.Join(seen, "\n"))
		}
	}
	go func() {
		for range lines { // keep the pipe drained until the end
		}
	}()
	return kubeconfig, command
}

func waitFor(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
