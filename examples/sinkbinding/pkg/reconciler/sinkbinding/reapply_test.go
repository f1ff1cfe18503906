package sinkbinding_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
	"github.com/bindkit/bindkit/wiring"
)

// TestPolicyReappliedOnUpdateChangesNothing updates a subject the policy
// bound at its create, as a workload controller does (an annotation): the
// policy applies again, and the pod template must come back unchanged, or
// every such update would start a rollout.
func TestPolicyReappliedOnUpdateChangesNothing(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.CreateNamespace(t, "sink-reapply-")
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	b := sinkBinding(ns, "sink", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "https://sink.example.com/re")
	if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindingtest.Run(t, env, bindingtest.RunOptions{Bindings: []*wiring.Kind{kind}})
	var created *appsv1.Deployment
	poll(t, "a Deployment bound at its create", func() (string, error) {
		d := shapes["Deployment"].object(ns, "web", web).(*appsv1.Deployment)
		got, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error(), nil
		}
		if len(got.Spec.Template.Spec.Containers[0].Env) < 2 {
			return "not bound", nil
		}
		created, err = kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		return "", err
	})
	created.Annotations["example.com/touched"] = "1"
	updated, err := kube.AppsV1().Deployments(ns).Update(ctx, created, metav1.UpdateOptions{FieldManager: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	// (A Deployment's generation moves with its annotations too, so the
	// template is compared, field for field.)
	if diff := cmp.Diff(created.Spec.Template, updated.Spec.Template); diff != "" {
		t.Errorf("an update re-admitted by the policy changed the template (-before +after):\n%s", diff)
	}
	if updated.Annotations[duck.BoundAnnotation] != created.Annotations[duck.BoundAnnotation] {
		t.Errorf("bound record %q became %q", created.Annotations[duck.BoundAnnotation], updated.Annotations[duck.BoundAnnotation])
	}
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}
