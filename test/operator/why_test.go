package operator_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/rollout"
)

// whyNotView is what kubectl bindkit why -o json prints of the Bindings
// that do not apply.
type whyNotView struct {
	Bindings   []struct{ Binding string }
	NotApplied []struct {
		Binding string
		Selects bool
		Reasons []string
	}
}

// TestWhyNamesWhyBindingsDoNotApply runs the sinkbinding example binary
// over a namespace whose Deployments no Binding binds, each for its own
// reason, and a namespace labelled out: kubectl bindkit why names every
// Binding of the workload's namespace and why it does not apply (the
// exclude label on the workload, a selector that does not match, another
// name, another kind, a paused rollout, the namespace's exclude label).
func TestWhyNamesWhyBindingsDoNotApply(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "whynot-")
	out := env.CreateNamespace(t, "whynot-out-")
	labelNamespace(t, kube, out, map[string]string{psbinding.ExcludeLabel: "true"})
	rollout.CreateDeployment(t, kube, ns, "web", map[string]string{"app": "web", psbinding.ExcludeLabel: "true"})
	rollout.CreateDeployment(t, kube, ns, "api", map[string]string{"app": "api"})
	rollout.CreateDeployment(t, kube, out, "web", map[string]string{"app": "web"})
	rollout.StartController(t, env)

	sts := rollout.SinkBinding(ns, "d-sts", map[string]any{"app": "web"}, "https://sink.example.com/sts", "", nil)
	sts.Object["spec"].(map[string]any)["subject"].(map[string]any)["kind"] = "StatefulSet"
	named := rollout.SinkBinding(ns, "c-named", nil, "https://sink.example.com/db", "", nil)
	named.Object["spec"].(map[string]any)["subject"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "db"}
	for _, b := range []struct {
		ns, name string
		u        *unstructured.Unstructured
	}{
		{ns, "a-web", rollout.SinkBinding(ns, "a-web", map[string]any{"app": "web"}, "https://sink.example.com/web", "", nil)},
		{ns, "b-other", rollout.SinkBinding(ns, "b-other", map[string]any{"app": "other"}, "https://sink.example.com/other", "", nil)},
		{ns, "c-named", named},
		{ns, "d-sts", sts},
		{ns, "e-paused", rollout.SinkBinding(ns, "e-paused", map[string]any{"app": "api"}, "https://sink.example.com/api", "", map[string]any{psbinding.RolloutPausedAnnotation: "true"})},
		{out, "web", rollout.SinkBinding(out, "web", map[string]any{"app": "web"}, "https://sink.example.com/out", "", nil)},
	} {
		createBinding(t, dyn, b.ns, b.u)
		rollout.Poll(t, time.Minute, b.ns+"/"+b.name+" reconciled", func() string {
			if r := readyReason(getBinding(t, dyn, b.ns, b.name)); r == "" {
				return "not yet"
			}
			return ""
		})
	}

	stdout, code := kubectl(t, env, "why", "deployment/web", "-n", ns)
	wantCode(t, "why deployment/web", code, exitOK)
	wantLines(t, "why deployment/web", stdout,
		"deployment.apps/web (namespace "+ns+"): no Binding records it",
		"The Bindings of namespace "+ns+", and why each does not apply:",
		"sinkbinding.bindings.bindkit.dev/a-web selects it:",
		"exclude label: the workload is labelled bindings.bindkit.dev/exclude=true: no Binding acts on it",
		"sinkbinding.bindings.bindkit.dev/b-other does not select it:",
		"selector: app=other does not match the workload's labels (app=web,bindings.bindkit.dev/exclude=true)",
		"sinkbinding.bindings.bindkit.dev/c-named does not select it:",
		`name: it names "db", not "web"`,
		"sinkbinding.bindings.bindkit.dev/d-sts does not select it:",
		"kind not bound: it binds statefulset.apps, not deployment.apps",
		"sinkbinding.bindings.bindkit.dev/e-paused does not select it:",
		"selector: app=api does not match")

	stdout, code = kubectl(t, env, "why", "deployment/api", "-n", ns)
	wantCode(t, "why deployment/api", code, exitOK)
	wantLines(t, "why deployment/api", stdout,
		"deployment.apps/api (namespace "+ns+"): no Binding records it",
		"sinkbinding.bindings.bindkit.dev/e-paused selects it:",
		"paused: no change reaches a subject until it is resumed (kubectl bindkit rollout resume)")

	stdout, code = kubectl(t, env, "why", "deployment/web", "-n", out)
	wantCode(t, "why deployment/web in the namespace labelled out", code, exitOK)
	wantLines(t, "why deployment/web in the namespace labelled out", stdout,
		"sinkbinding.bindings.bindkit.dev/web selects it:",
		"namespace: "+out+" is labelled bindings.bindkit.dev/exclude=true: no Binding acts in it")

	var view whyNotView
	wantCode(t, "why -o json", kubectlJSON(t, env, &view, "why", "deployment/web", "-n", ns), exitOK)
	var got []string
	for _, e := range view.NotApplied {
		got = append(got, fmt.Sprintf("%s %v %s", e.Binding, e.Selects, strings.SplitN(e.Reasons[0], ":", 2)[0]))
	}
	want := []string{
		"sinkbinding.bindings.bindkit.dev/a-web true exclude label",
		"sinkbinding.bindings.bindkit.dev/b-other false selector",
		"sinkbinding.bindings.bindkit.dev/c-named false name",
		"sinkbinding.bindings.bindkit.dev/d-sts false kind not bound",
		"sinkbinding.bindings.bindkit.dev/e-paused false selector",
	}
	if len(view.Bindings) != 0 || !slices.Equal(want, got) {
		t.Errorf("why deployment/web -o json: records %v, not applied %q; want none, and %q", view.Bindings, got, want)
	}

	// A Binding the workload records and one that selects it but does
	// not apply: the second is named under the table.
	createBinding(t, dyn, ns, rollout.SinkBinding(ns, "f-api", map[string]any{"app": "api"}, "https://sink.example.com/api2", "", nil))
	rollout.Poll(t, time.Minute, "api bound by f-api", func() string {
		if d := deployments(t, kube, ns)["api"]; !strings.Contains(d.Annotations["bindings.bindkit.dev/bound"], "/f-api@") {
			return "bound " + d.Annotations["bindings.bindkit.dev/bound"]
		}
		return ""
	})
	stdout, code = kubectl(t, env, "why", "deployment/api", "-n", ns)
	wantCode(t, "why deployment/api, bound", code, exitOK)
	wantLines(t, "why deployment/api, bound", stdout,
		"deployment.apps/api (namespace "+ns+") records 1 Binding:",
		"sinkbinding.bindings.bindkit.dev/f-api 1 1 complete BindingAvailable",
		"Bindings of namespace "+ns+" that select it and do not apply:",
		"sinkbinding.bindings.bindkit.dev/e-paused selects it:",
		"paused: ")
	if strings.Contains(stdout, "b-other") {
		t.Errorf("why of a bound workload names a Binding that does not select it:\n%s", stdout)
	}
}

// labelNamespace sets labels on the namespace ns.
func labelNamespace(t *testing.T, kube kubernetes.Interface, ns string, labels map[string]string) {
	t.Helper()
	n, err := kube.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := kube.CoreV1().Namespaces().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createBinding creates the SinkBinding u in ns.
func createBinding(t *testing.T, dyn dynamic.Interface, ns string, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
