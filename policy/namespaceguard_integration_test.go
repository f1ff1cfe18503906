package policy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/demo"
)

var githubBindings = schema.GroupVersionResource{Group: "bindings.bindkit.dev", Version: "v1alpha1", Resource: "githubbindings"}

func githubBinding(namespace, name, subjectNamespace string) *unstructured.Unstructured {
	subject := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
	if subjectNamespace != "" {
		subject["namespace"] = subjectNamespace
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": githubBindings.GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"subject": subject, "secret": map[string]any{"name": "token"}},
	}}
}

// TestNamespaceGuardThroughExampleBinaryWithRealAPIServer runs the example
// binary with its default flags (leader election on) and checks that the
// API server itself refuses a Binding naming another namespace, at create
// and at update, with a message naming both namespaces; that Bindings in
// their own namespace pass; and that the guard is healed after an edit and
// a deletion.
func TestNamespaceGuardThroughExampleBinaryWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	repoRoot, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{demo.SystemNamespace, "guard-a", "guard-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	binary := filepath.Join(t.TempDir(), "githubbinding-controller")
	if err := demo.BuildController(ctx, repoRoot, binary); err != nil {
		t.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary)
	if err != nil {
		t.Fatal(err)
	}
	// Pointed at the port the controller reported (it binds one the
	// kernel picks).
	cfg, err := demo.WebhookConfiguration(repoRoot, ctrl.WebhookPort)
	if err != nil {
		ctrl.Kill()
		t.Fatal(err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		ctrl.Kill()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctrl.Stop(); err != nil {
			t.Errorf("stop controller: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", ctrl.LogTail(60))
		}
	})
	bindings := dyn.Resource(githubBindings)
	const want = "subject names namespace guard-b, but a Binding binds subjects only in its own namespace (guard-a)"
	refused := func(err error) bool {
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), want)
	}

	// Until the leader has programmed the policy and the API server loaded
	// it, a create passes: probe with dry runs.
	poll(t, "the API server to refuse a Binding naming another namespace", func() (bool, error) {
		_, err := bindings.Namespace("guard-a").Create(ctx, githubBinding("guard-a", "probe", "guard-b"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || refused(err) {
			return err != nil, nil
		}
		return false, err
	})

	_, err = bindings.Namespace("guard-a").Create(ctx, githubBinding("guard-a", "other", "guard-b"), metav1.CreateOptions{})
	if !refused(err) {
		t.Fatalf("create of a Binding naming namespace guard-b in guard-a: got error %v, want Invalid with %q", err, want)
	}
	for _, subjectNS := range []string{"", "guard-a"} {
		name := "own" + subjectNS
		if _, err := bindings.Namespace("guard-a").Create(ctx, githubBinding("guard-a", name, subjectNS), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create of a Binding with subject namespace %q in guard-a: %v", subjectNS, err)
		}
	}
	// Update: moving an accepted Binding's subject to another namespace.
	// The controller writes the Binding (finalizer, status) meanwhile, so
	// a conflict is retried on a fresh copy.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := bindings.Namespace("guard-a").Get(ctx, "own", metav1.GetOptions{})
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedField(b.Object, "guard-b", "spec", "subject", "namespace")
		_, err = bindings.Namespace("guard-a").Update(ctx, b, metav1.UpdateOptions{})
		return err
	})
	if !refused(err) {
		t.Fatalf("update of Binding guard-a/own to subject namespace guard-b: got error %v, want Invalid with %q", err, want)
	}

	// Healing: an operator's edit is undone, a deletion is re-created.
	name := policy.NamespaceGuardName(githubBindings.GroupResource())
	vaps := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	vap, err := vaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	programmed := vap.Spec.Validations[0].Expression
	vap.Spec.Validations[0].Expression = "true"
	if _, err := vaps.Update(ctx, vap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the edited policy to be restored", func() (bool, error) {
		got, err := vaps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Spec.Validations[0].Expression == programmed, nil
	})
	vapbs := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if err := vapbs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the deleted policy binding to be re-created", func() (bool, error) {
		_, err := vapbs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	// Settled: the programmed objects are not rewritten over and over (a
	// desired spec missing a server default would loop).
	before, err := vaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	after, err := vaps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("policy %s rewritten while nobody edited it: resourceVersion %s then %s", name, before.ResourceVersion, after.ResourceVersion)
	}
	poll(t, "the API server to refuse again after the re-created binding", func() (bool, error) {
		_, err := bindings.Namespace("guard-a").Create(ctx, githubBinding("guard-a", "probe", "guard-b"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || refused(err) {
			return err != nil, nil
		}
		return false, err
	})
}

func poll(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, errors.Join(err, fmt.Errorf("last error: %v", last)))
	}
}
