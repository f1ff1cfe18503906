package sinkbinding_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
)

// TestSinkBindingAdmissionPathsAgree runs the contract kit's comparison of
// the two admission paths over every workload shape: a server-side dry
// run through the MutatingAdmissionPolicy and one through the webhook
// must give the same object.
func TestSinkBindingAdmissionPathsAgree(t *testing.T) {
	env := controlPlane.Env(t)
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.CreateNamespace(t, "sink-paths-")
	dyn := dynamic.NewForConfigOrDie(env.Config)
	var objects []*unstructured.Unstructured
	for k, s := range shapes {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s.object(ns, "web-"+strings.ToLower(k), web))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: content}
		objects = append(objects, obj)
		subject := map[string]any{"apiVersion": obj.GetAPIVersion(), "kind": k, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}
		if _, err := dyn.Resource(sinkBindings).Namespace(ns).Create(t.Context(), sinkBinding(ns, "sink-"+strings.ToLower(k), subject, "https://sink.example.com/paths"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bindingtest.CompareAdmissionPaths(t, env, kind, bindingtest.RunOptions{}, objects...)
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}
