package admission_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/test/faults"
)

// calledIn returns the namespaces the webhook's namespaceSelector names
// (nil when it names none) and whether it has rules at all.
func calledIn(h *faults.Harness) (namespaces []string, rules bool, err error) {
	cfg, err := h.Configuration()
	if err != nil {
		return nil, false, err
	}
	wh := cfg.Webhooks[0]
	if wh.NamespaceSelector != nil {
		for _, r := range wh.NamespaceSelector.MatchExpressions {
			if r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpIn {
				namespaces = r.Values
			}
		}
	}
	return namespaces, len(wh.Rules) > 0 && len(wh.ClientConfig.CABundle) > 0, nil
}

// waitCalledIn waits until the webhook is called in exactly want (none:
// no rules at all).
func waitCalledIn(h *faults.Harness, what string, want []string) time.Duration {
	return h.Eventually(what, 30*time.Second, func() (string, error) {
		got, rules, err := calledIn(h)
		if err != nil {
			return err.Error(), nil
		}
		if len(want) == 0 {
			if rules {
				return fmt.Sprintf("webhook has rules, namespaces %v", got), nil
			}
			return "", nil
		}
		if !rules {
			return "no rules yet", nil
		}
		return cmp.Diff(want, got), nil
	})
}

// requireNoNamespaceGuard fails the test if the GithubBinding CRD keeps a
// subject in the Binding's namespace with a CEL rule. config/'s CRD is
// generated without one, as a Binding author's own CRD may be: isolation is
// the framework's job, and this test must show it does it alone.
func requireNoNamespaceGuard(t *testing.T) {
	t.Helper()
	path := filepath.Join(repoRoot, faults.CRDPath)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "__namespace__") {
		t.Fatalf("%s: a CEL rule on the subject's namespace is back; this test must run without one (strip it here)", path)
	}
}

// TestWebhookCalledOnlyWhereBindingsApplyWithRealAPIServer: the
// configuration the controller binary writes asks the kube-apiserver to
// call the webhook only in namespaces that hold a GithubBinding, and
// follows Bindings as they come and go; a Binding whose subject is in
// another namespace (if it gets past the namespace guard), and one in
// kube-system, add no namespace. With the
// process stopped and failurePolicy Fail, creates in a namespace without
// Bindings and in kube-system succeed, while those in a namespace with one
// are refused (the webhook does stand there).
func TestWebhookCalledOnlyWhereBindingsApplyWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	requireNoNamespaceGuard(t)
	ctx := context.Background()

	waitCalledIn(h, "no Bindings: the webhook matches nothing", nil)
	a, b, c, d, free := h.Namespace("scope-a-"), h.Namespace("scope-b-"), h.Namespace("scope-c-"), h.Namespace("scope-d-"), h.Namespace("scope-free-")

	h.Binding(a, "web", "web", "")
	took := waitCalledIn(h, "a Binding in a", []string{a})
	t.Logf("configuration followed the first Binding in %.2fs", took.Seconds())
	h.Binding(b, "web", "web", "")
	waitCalledIn(h, "Bindings in a and b", sorted(a, b))
	// The example binary's namespace guard refuses a Binding naming
	// another namespace once the kube-apiserver has loaded it; one
	// created before that exists, and the scope must ignore it.
	if err := h.CreateBinding(c, "reach", "web", d); err != nil {
		if !strings.Contains(err.Error(), "but a Binding binds subjects only in its own namespace") {
			t.Fatalf("cross-namespace Binding refused for another reason: %v", err)
		}
		t.Logf("cross-namespace Binding refused by the namespace guard: %v", err)
	}
	h.Binding(metav1.NamespaceSystem, "system", "web", "")
	h.Binding(a, "second", "web", "")
	// Nothing to wait for: give the controller time to get it wrong.
	time.Sleep(3 * time.Second)
	waitCalledIn(h, "a cross-namespace Binding and one in kube-system add nothing", sorted(a, b))
	h.DeleteBinding(a, "web")
	waitCalledIn(h, "a still holds a Binding", sorted(a, b))
	h.DeleteBinding(a, "second")
	took = waitCalledIn(h, "a holds no Binding any more", []string{b})
	t.Logf("configuration followed the last Binding leaving a namespace %.2fs after it was gone", took.Seconds())
	h.WaitAdmissionBinds(b, "web")

	h.StopProcess()
	cfg, err := h.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Webhooks[0].FailurePolicy; p == nil || *p != "Fail" {
		t.Fatalf("failurePolicy %v, want Fail as config/ installs it", p)
	}
	deployments := func(ns string) error {
		_, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, "while-down", "web"), metav1.CreateOptions{})
		if err == nil {
			h.Kube.AppsV1().Deployments(ns).Delete(ctx, "while-down", metav1.DeleteOptions{})
		}
		return err
	}
	// The configuration stored without a is loaded by the kube-apiserver
	// some time after: a create there may reach the stopped webhook for a
	// moment, never for long.
	for _, ns := range []string{free, a, metav1.NamespaceSystem, c, d} {
		h.Eventually("a create in "+ns+" with the webhook down", 30*time.Second, func() (string, error) {
			if err := deployments(ns); err != nil {
				return err.Error(), nil
			}
			return "", nil
		})
	}
	if err := deployments(b); err == nil {
		t.Errorf("create in %s, which holds a Binding, succeeded with the webhook down: the webhook is not called there", b)
	} else {
		t.Logf("create in the namespace with a Binding, webhook down, refused as expected: %v", err)
	}

	// Up again, so the Bindings' finalizers can go at cleanup.
	h.StartProcess()
	for _, ns := range []string{a, b, c, d, free, metav1.NamespaceSystem} {
		h.Audit(ns)
	}
}

func sorted(namespaces ...string) []string {
	out := slices.Clone(namespaces)
	slices.Sort(out)
	return out
}
