package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/faults"
)

// bindSome creates, in a new namespace, Deployments app=web and a
// GithubBinding over them, and waits until they are bound.
func bindSome(t *testing.T, h *faults.Harness, prefix string, n int) string {
	t.Helper()
	ns := h.Namespace(prefix)
	ctx := context.Background()
	for i := range n {
		if _, err := h.Kube.AppsV1().Deployments(ns).Create(ctx, faults.Deployment(ns, fmt.Sprintf("web-%d", i), "web"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.Binding(ns, "gh", "web", "")
	h.Eventually("subjects bound", 60*time.Second, func() (string, error) {
		list, err := h.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, d := range list.Items {
			if !faults.Bound(&d) {
				return d.Name + " not bound", nil
			}
		}
		return "", nil
	})
	return ns
}

func namespaceGone(t *testing.T, h *faults.Harness, ns string, timeout time.Duration) {
	t.Helper()
	h.Eventually("namespace "+ns+" deleted", timeout, func() (string, error) {
		got, err := h.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s, conditions %v", got.Status.Phase, got.Status.Conditions), nil
	})
}

// Deleting a namespace that holds Bindings and bound subjects completes:
// the namespace controller deletes the subjects and the Bindings, the
// reconciler releases the Bindings' finalizers, and the namespace goes.
func TestNamespaceWithBindingsIsDeletedWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := bindSome(t, h, "doomed-", 3)
	// The audit runs before the namespace goes: after, there is nothing
	// left in it to audit.
	h.Audit(ns)
	if err := h.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	namespaceGone(t, h, ns, 90*time.Second)
}

// Removing bindkit: with the controller stopped, the binary's --uninstall
// stops the webhook from being called, unbinds every subject (one excluded
// after it was bound included) and releases every finalizer, and exits 0;
// then the installation goes (its namespaces, the CRD) and nothing is left
// waiting.
func TestUninstallLeavesNothingBehindWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ctx := context.Background()
	first := bindSome(t, h, "tenant-a-", 2)
	second := bindSome(t, h, "tenant-b-", 2)
	// Excluded after it was bound: a reconcile leaves it, an uninstall
	// does not.
	if _, err := h.Kube.AppsV1().Deployments(first).Patch(ctx, "web-0", types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, psbinding.ExcludeLabel), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	h.StopProcess()
	log, err := h.RunOnce(2*time.Minute, "--uninstall")
	if err != nil {
		t.Fatalf("--uninstall: %v\n%s", err, log)
	}
	if !strings.Contains(log, "uninstalled") {
		t.Errorf("--uninstall did not say it finished:\n%s", log)
	}

	for _, ns := range []string{first, second} {
		list, err := h.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Items {
			if faults.Bound(&d) || d.Annotations[duck.BoundAnnotation] != "" {
				t.Errorf("%s/%s still bound (record %q)", ns, d.Name, d.Annotations[duck.BoundAnnotation])
			}
		}
		b, err := h.Dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Get(ctx, "gh", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.GetFinalizers()) != 0 {
			t.Errorf("GithubBinding %s/gh keeps finalizers %v", ns, b.GetFinalizers())
		}
	}
	cfg, err := h.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		if len(w.Rules) != 0 {
			t.Errorf("webhook %s still has rules %v", w.Name, w.Rules)
		}
	}
	// The controller is stopped: the audit checks that --uninstall left
	// no record behind, before the namespaces go.
	for _, ns := range []string{first, second} {
		h.Audit(ns)
	}

	// The installation goes, with nothing left waiting on the controller:
	// the tenants' namespaces and every GithubBinding.
	for _, ns := range []string{first, second} {
		if err := h.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{first, second} {
		namespaceGone(t, h, ns, 90*time.Second)
	}
	// The harness's cleanup would start nothing: the process is stopped.
}
