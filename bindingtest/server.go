package bindingtest

import (
	"context"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

// serverResources are the resources of the built-in kinds among Subjects
// that the reconciler patches. A bare Pod and a Job are bound at admission
// only (their pod templates are immutable), so the server has nothing to
// patch on them.
var serverResources = map[string]string{
	"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
	"ReplicaSet": "replicasets", "CronJob": "cronjobs",
}

// serverSubject checks the contract on one built-in subject as the
// kube-apiserver of env stores it: created for real in namespace ns (so
// the server fills in its defaults), then bound and unbound with the JSON
// patches the reconciler sends. It
// reports whether Do changed the subject.
func (c *checker) serverSubject(ctx context.Context, b psbinding.Bindable, s Subject, client dynamic.Interface, ns string) bool {
	gvk := s.Object.GroupVersionKind()
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: serverResources[gvk.Kind]}
	obj := s.Object.DeepCopy()
	stripForCreate(obj.Object)
	obj.SetNamespace(ns)
	obj.SetName("contract-" + strings.ToLower(gvk.Kind))
	res := client.Resource(gvr).Namespace(ns)
	stored, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		c.errorf("create the subject on the API server: %v", err)
		return false
	}
	patch := func(what string, base *unstructured.Unstructured, ops []jsonpatch.Operation) (*unstructured.Unstructured, bool) {
		if len(ops) == 0 {
			return base, true
		}
		guarded, err := guardOps(base.Object, ops)
		if err != nil {
			c.errorf("%s: guard the patch: %v\npatch:\n%s", what, err, formatOps(s.Shape, ops))
			return nil, false
		}
		out, err := res.Patch(ctx, base.GetName(), types.JSONPatchType, guarded, metav1.PatchOptions{})
		if err != nil {
			c.errorf("%s: the API server refuses the patch: %v\npatch:\n%s", what, err, formatOps(s.Shape, ops))
			return nil, false
		}
		return out, true
	}
	before, err := s.Shape.FromUnstructured(stored)
	if err != nil {
		c.errorf("decode the stored subject through shape %s: %v", s.Shape, err)
		return false
	}

	undone := before.DeepCopy()
	b.Undo(ctx, undone)
	if ops := c.createPatch(s.Shape, before, undone); len(ops) > 0 {
		c.broke("unbound", "on the subject as the API server stores it, Undo of a subject Do never bound changes it (the reconciler would patch every subject it unbinds):\npatch:\n%s", formatOps(s.Shape, ops))
	}

	after := before.DeepCopy()
	b.Do(ctx, after)
	ops := c.createPatch(s.Shape, before, after)
	if len(ops) == 0 {
		return false
	}
	bound, ok := patch("Do", stored, ops)
	if !ok {
		return true
	}
	reBound, err := s.Shape.FromUnstructured(bound)
	if err != nil {
		c.errorf("decode the bound subject: %v", err)
		return true
	}
	again := reBound.DeepCopy()
	b.Do(ctx, again)
	if againOps := c.createPatch(s.Shape, reBound, again); len(againOps) > 0 {
		if dropped := droppedDefaults(s.Shape, againOps); len(dropped) > 0 {
			c.errorf("Do drops what the API server fills in: on the subject as the server stores it after Do's patch, Do removes %s again, so the reconciler patches it forever (change the fields you bind in place; do not delete and re-append a container, volume or env var)\npatch of Do again:\n%s",
				strings.Join(dropped, ", "), formatOps(s.Shape, againOps))
		} else {
			c.broke("idempotent", "Do is not idempotent on the subject as the API server stores it: Do on the subject it bound changes it again\npatch of Do again:\n%s", formatOps(s.Shape, againOps))
		}
	}

	unbound := reBound.DeepCopy()
	b.Undo(ctx, unbound)
	restored, ok := patch("Undo", bound, c.createPatch(s.Shape, reBound, unbound))
	if !ok {
		return true
	}
	got, err := s.Shape.FromUnstructured(restored)
	if err != nil {
		c.errorf("decode the unbound subject: %v", err)
		return true
	}
	if diff := cmp.Diff(before.Spec.Template, got.Spec.Template, cmpopts.EquateEmpty()); diff != "" {
		c.broke("restore", "on the subject as the API server stores it, Undo after Do does not restore the pod template (-before Do +after Undo):\n%s", diff)
	}
	return true
}

// droppedDefaults names the fields the remove and replace operations of
// ops take out, relative to the pod template.
func droppedDefaults(shape duck.Shape, ops []jsonpatch.Operation) []string {
	var out []string
	for _, op := range ops {
		if op.Operation == "remove" {
			out = append(out, templatePath(shape, op.Path))
		}
	}
	return out
}

// guardOps guards ops as the reconciler does and encodes them.
func guardOps(obj map[string]any, ops []jsonpatch.Operation) ([]byte, error) {
	guarded, err := duck.Guard(obj, ops)
	if err != nil {
		return nil, err
	}
	return duck.MarshalPatch(guarded)
}

// stripForCreate drops what a create may not carry: the server's
// metadata, the status and the UnknownField markers a built-in kind's
// server would prune.
func stripForCreate(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, UnknownField)
		delete(v, "status")
		if m, ok := v["metadata"].(map[string]any); ok {
			for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp"} {
				delete(m, k)
			}
		}
		for _, child := range v {
			stripForCreate(child)
		}
	case []any:
		for _, child := range v {
			stripForCreate(child)
		}
	}
}

// templatePath writes a JSON pointer of a subject relative to its pod
// template, so that the same problem reads the same on every shape.
func templatePath(shape duck.Shape, p string) string {
	if len(shape.Path()) == 0 { // a Pod is its own template
		return "template" + p
	}
	prefix := "/" + strings.Join(shape.Path(), "/")
	if rest, ok := strings.CutPrefix(p, prefix); ok {
		return "template" + rest
	}
	return p
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
