package fixturebinding_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindkit/bindkit/test/fixturebinding"
)

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// A Binding kind's CRD that is deleted and, after long enough for
// client-go's reflector to back off to its 30-second ceiling, created
// again is picked up within seconds: a new Binding binds an existing
// subject (reconciler) and a new one (admission) within 10 seconds of the
// CRD being established.
func TestRecreatedCRDIsPickedUpPromptlyWithRealAPIServer(t *testing.T) {
	r := newRig(t)
	ns := r.env.CreateNamespace(t, "recreated-")
	ctx := context.Background()
	kind := fixturebinding.OtherKind
	gvr := fixturebinding.GVR(kind)
	crds := r.dyn.Resource(crdsGVR)
	crd, err := crds.Get(ctx, gvr.GroupResource().String(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Bindings of other tests (their processes gone) hold finalizers the
	// CRD's deletion would wait for.
	list, err := r.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Items {
		r.dyn.Resource(gvr).Namespace(b.GetNamespace()).Patch(ctx, b.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	if err := crds.Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "CRD gone", 60*time.Second, func() bool {
		_, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	time.Sleep(40 * time.Second)
	r.running()
	if _, err := r.deployment(ns, "existing", map[string]string{"app": "web"}); err != nil {
		t.Fatal(err)
	}

	fresh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GetAPIVersion(), "kind": crd.GetKind(),
		"metadata": map[string]any{"name": crd.GetName()},
		"spec":     crd.Object["spec"],
	}}
	if _, err := crds.Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "CRD established", 60*time.Second, func() bool {
		u, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
				return true
			}
		}
		return false
	})
	established := time.Now()
	// The API server may answer the first create of a just-established
	// kind with NotFound for a moment.
	poll(t, "Binding created", 10*time.Second, func() bool {
		return r.tryBinding(kind, ns, "again", "web") == nil
	})
	r.waitBound(ns, "existing", kind, "again")
	reconciled := time.Since(established)
	var admitted time.Duration
	poll(t, "a new subject bound at admission", 20*time.Second, func() bool {
		d, err := r.deployment(ns, "new-"+time.Now().Format("150405.000000"), map[string]string{"app": "web"})
		if err != nil {
			return false
		}
		if _, ok := env(d, kind); ok {
			admitted = time.Since(established)
			return true
		}
		r.kube.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{})
		return false
	})
	t.Logf("after the CRD was established again: existing subject bound by a new Binding in %v, a new subject bound at admission in %v", reconciled.Round(time.Millisecond), admitted.Round(time.Millisecond))
	if reconciled > 10*time.Second || admitted > 10*time.Second {
		t.Errorf("picked up %v (reconciler) and %v (admission) after the CRD was established, want within 10s", reconciled, admitted)
	}
	r.running()
	r.audit(ns)
}

func poll(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
