package operator_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/rollout"
	"github.com/bindkit/bindkit/test/testenv"
)

var sinkBindings = v1alpha1.GroupVersionResource()

// createDeployments creates one-replica Deployments named names in ns,
// labelled app=web and with labels, and waits until every one has rolled
// out.
func createDeployments(t *testing.T, kube kubernetes.Interface, ns string, labels map[string]string, names ...string) {
	t.Helper()
	for _, name := range names {
		l := map[string]string{"app": "web"}
		for k, v := range labels {
			l[k] = v
		}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
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
	rollout.Poll(t, 3*time.Minute, fmt.Sprintf("the %d Deployments to roll out", len(names)), func() string {
		list, err := kube.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		n := 0
		for i := range list.Items {
			if rollout.RolledOut(t, &list.Items[i]) {
				n++
			}
		}
		if n < len(names) {
			return fmt.Sprintf("%d of %d rolled out", n, len(names))
		}
		return ""
	})
}

// names are n names prefix-000, ...
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// getBinding reads the SinkBinding ns/name.
func getBinding(t *testing.T, dyn dynamic.Interface, ns, name string) *v1alpha1.SinkBinding {
	t.Helper()
	u, err := dyn.Resource(sinkBindings).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b v1alpha1.SinkBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

// readyReason is the Binding's Ready reason once its status describes its
// generation, "" before.
func readyReason(b *v1alpha1.SinkBinding) string {
	c := b.Status.GetCondition(duck.ConditionReady)
	if c == nil || b.Status.ObservedGeneration != b.Generation || c.ObservedGeneration != b.Generation {
		return ""
	}
	if c.Status == metav1.ConditionTrue {
		return "Ready"
	}
	return c.Reason
}

// setSink edits the Binding's sink: a new generation.
func setSink(t *testing.T, dyn dynamic.Interface, ns, name, sink string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"sink":%q}}`, sink)
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Patch(t.Context(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deployments lists the Deployments of ns by name.
func deployments(t *testing.T, kube kubernetes.Interface, ns string) map[string]*appsv1.Deployment {
	t.Helper()
	list, err := kube.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// The plugin's exit statuses, as its --help and the README document them
// (package cli's Exit constants).
const (
	exitOK      = 0
	exitError   = 1
	exitChanges = 3
	exitPaused  = 4
	exitHalted  = 5
)

// pluginModule is the plugin's module directory (a module of its own, so
// the framework's module cannot import its packages).
const pluginModule = "../../cmd/kubectl-bindkit"

// plugin returns the kubectl-bindkit binary, built from pluginModule
// once per control plane, as an operator installs it.
func plugin(t *testing.T, env *testenv.Environment) string {
	t.Helper()
	binary, err := demo.BuiltFor(env, pluginModule, ".", "kubectl-bindkit")
	if err != nil {
		t.Fatal(err)
	}
	return binary
}

// run runs the kubectl-bindkit binary with args, as kubectl runs a plugin,
// with the control plane's own discovery cache ($KUBECACHEDIR, shared as
// one operator's ~/.kube/cache is), and returns
// its output, its errors and its exit status; the command line, the
// output and the errors go to the test's log.
func run(t *testing.T, env *testenv.Environment, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(t.Context(), plugin(t, env), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(env.Dir, "kube-cache"))
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("kubectl bindkit %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("$ kubectl bindkit %s\n%s%s(exit %d)", strings.Join(args, " "), out.String(), errOut.String(), code)
	return out.String(), errOut.String(), code
}

// kubectl runs kubectl-bindkit against env with args, and returns its
// output and exit status.
func kubectl(t *testing.T, env *testenv.Environment, args ...string) (string, int) {
	t.Helper()
	out, _, code := run(t, env, append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...)
	return out, code
}

// kubectlJSON runs kubectl-bindkit with -o json and decodes its output
// into v.
func kubectlJSON(t *testing.T, env *testenv.Environment, v any, args ...string) int {
	t.Helper()
	out, code := kubectl(t, env, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl bindkit %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return code
}

// wantCode fails the test unless code is want.
func wantCode(t *testing.T, what string, code, want int) {
	t.Helper()
	if code != want {
		t.Errorf("%s: exit status %d, want %d", what, code, want)
	}
}

// wantLines fails the test unless out holds every line of want, in
// order (each a substring of a line of its own, runs of spaces counting
// as one, so that a table's widths do not matter).
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	lines := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && !strings.Contains(squeeze(lines[i]), squeeze(w)) {
			i++
		}
		if i == len(lines) {
			t.Errorf("%s: no line with %q (in order) in:\n%s", what, w, out)
			return
		}
		i++
	}
}
