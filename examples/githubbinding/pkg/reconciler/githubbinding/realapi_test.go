package githubbinding

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"
)

// config is the repository's config/, which deploys this example.
const config = "../../../../../config/"

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{config + "300-githubbinding.yaml"}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

// TestGithubBindingWithRealAPIServer runs the controller and webhook New
// wires under sharedmain, with config/'s CRD and webhook configuration,
// against a real kube-apiserver: a Deployment from before start-up is
// bound by the reconciler, one created later by the webhook, and deleting
// the Binding unbinds the first.
func TestGithubBindingWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	bindings := dynamic.NewForConfigOrDie(env.Config).Resource(binding.GVR)
	namespace := env.CreateNamespace(t, "githubbinding-")
	if _, err := kube.AppsV1().Deployments(namespace).Create(ctx, newDeployment(namespace, "web", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gh := newGithubBinding(tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	gh.Namespace = namespace
	gh.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bindings.Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	bindingtest.Run(t, env, bindingtest.RunOptions{
		Bindings:              []*wiring.Kind{binding},
		WebhookConfigurations: []string{config + "500-webhook-configuration.yaml"},
		Component:             "githubbinding-controller",
	})

	poll(t, "the reconciler binds Deployment web", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && mounted(d), nil
	})
	poll(t, "the webhook binds a Deployment as it is created", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(namespace).Create(ctx, newDeployment(namespace, "later", "web"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && mounted(d), nil
	})
	// The Webhook programs the authority policy: a GithubBinding reaches
	// no further than its author may.
	bindingtest.CheckAuthority(t, env, binding, gh)
	auditKinds := bindingtest.AuditOptions{Namespace: namespace, Kinds: []audit.Kind{faults.GithubBindingKind}}
	bindingtest.Audit(t, env, auditKinds)
	if err := bindings.Namespace(namespace).Delete(ctx, "gh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "deleting the Binding unbinds Deployment web", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && !mounted(d) && len(d.Spec.Template.Spec.Volumes) == 0, nil
	})
	poll(t, "the GithubBinding is gone", func(ctx context.Context) (bool, error) {
		_, err := bindings.Namespace(namespace).Get(ctx, "gh", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	bindingtest.Audit(t, env, auditKinds)
}

func poll(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, cond); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}
