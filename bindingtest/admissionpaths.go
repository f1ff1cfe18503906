package bindingtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/wiring"
)

// CompareAdmissionPaths checks the promise of a declarative Binding kind
// (wiring.Kind.Declarative) that its two admission paths agree. It runs
// the kind under sharedmain twice against env (Run, with opts and
// opts.Bindings set to the kind): first admitting by
// MutatingAdmissionPolicy, then by webhook (--declarative-admission=webhook,
// which also removes the policy). Through each it creates every object by
// server-side dry run, waiting until the kind has bound it (its
// duck.BoundAnnotation names a Binding of the kind), and it reports with
// t.Errorf each object whose two results differ, as a diff; the uid,
// creation time, resource version, generation and managed fields, which
// differ between any two creates, are left out, and so is the uid wherever
// the kube-apiserver copied it (a Job's selector).
//
// The Bindings that bind the objects must exist in env before the call,
// and every object must be one a Binding of the kind binds. The
// kube-apiserver must serve admissionregistration.k8s.io/v1
// MutatingAdmissionPolicy (Kubernetes 1.36 and later). When the test
// ends, Run's cleanup deletes the kind's Bindings.
func CompareAdmissionPaths(t *testing.T, env *envtest.Environment, kind *wiring.Kind, opts RunOptions, objects ...*unstructured.Unstructured) {
	t.Helper()
	if !kind.Declarative {
		t.Fatalf("bindingtest.CompareAdmissionPaths: %s is not declarative: it is always admitted by the webhook", kind.GVK.Kind)
	}
	opts.Bindings = []*wiring.Kind{kind}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	policyName := policy.MutatingPolicyName(kind.GVR.GroupResource())

	byPolicy := Run(t, env, opts)
	if !strings.Contains(byPolicy.Logs(), "admission by MutatingAdmissionPolicy") {
		t.Fatalf("bindingtest.CompareAdmissionPaths: %s is not admitted by policy; process log:\n%s", kind.GVK.Kind, byPolicy.Logs())
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	viaPolicy := admitEach(t, dyn, mapper, kind, objects)
	if err := byPolicy.Stop(); err != nil {
		t.Fatalf("bindingtest.CompareAdmissionPaths: stop the process admitting by policy: %v", err)
	}

	opts.Flags.DeclarativeAdmission = policy.ByWebhook
	Run(t, env, opts) // stopped by its cleanup, after the Bindings go
	waitFor(t, "the admission policy "+policyName+" to be removed", func(ctx context.Context) (string, error) {
		_, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policyName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return fmt.Sprintf("still there (%v)", err), nil
	})
	viaWebhook := admitEach(t, dyn, mapper, kind, objects)
	for i, obj := range objects {
		if diff := cmp.Diff(viaPolicy[i], viaWebhook[i]); diff != "" {
			t.Errorf("%s %s/%s created by dry run: through the policy vs through the webhook (-policy +webhook):\n%s",
				obj.GetKind(), obj.GetNamespace(), obj.GetName(), diff)
		}
	}
}

// admitEach creates each object by dry run until a Binding of kind binds
// it, and returns what the kube-apiserver returned, made comparable.
func admitEach(t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, kind *wiring.Kind, objects []*unstructured.Unstructured) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(objects))
	for i, obj := range objects {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("bindingtest.CompareAdmissionPaths: %s %s/%s: %v", gvk, obj.GetNamespace(), obj.GetName(), err)
		}
		gvr := mapping.Resource
		waitFor(t, fmt.Sprintf("%s %s/%s to be bound at admission", obj.GetKind(), obj.GetNamespace(), obj.GetName()), func(ctx context.Context) (string, error) {
			got, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return err.Error(), nil // the webhook may not serve yet: failurePolicy Fail
			}
			for by := range duck.BoundOf(got.GetAnnotations()) {
				if by.Resource == kind.GVR.GroupResource() {
					out[i] = Comparable(got)
					return "", nil
				}
			}
			return "not bound", nil
		})
	}
	return out
}

// waitFor polls check every 100ms, for a minute at most, until it returns
// "", and fails t with its last word otherwise.
func waitFor(t *testing.T, what string, check func(context.Context) (string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		problem, err := check(ctx)
		last = problem
		return err == nil && problem == "", err
	})
	if err != nil {
		t.Fatalf("bindingtest.CompareAdmissionPaths: waiting for %s: %v (last: %s)", what, err, last)
	}
}

// Comparable is obj, as the kube-apiserver returned it from a create,
// without what differs between two creates of the same object: its uid
// (wherever the kube-apiserver copied it, a Job's selector say), creation
// time, resource version, generation and managed fields. Two admission
// paths that agree give equal Comparables.
func Comparable(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	for _, f := range []string{"uid", "creationTimestamp", "resourceVersion", "managedFields", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	dropValue(c.Object, string(obj.GetUID()))
	return c.Object
}

// dropValue removes from m, at any depth, every map entry whose value is v.
func dropValue(m map[string]any, v string) {
	for k, x := range m {
		switch x := x.(type) {
		case string:
			if x == v {
				delete(m, k)
			}
		case map[string]any:
			dropValue(x, v)
		case []any:
			for _, e := range x {
				if e, ok := e.(map[string]any); ok {
					dropValue(e, v)
				}
			}
		}
	}
}
