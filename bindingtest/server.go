package bindingtest

import (
	"errors"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
)

// serverResources are the resources of the built-in kinds among Subjects
// that the reconciler patches. A bare Pod and a Job are bound at admission
// only (their pod templates are immutable), so the server has nothing to
// patch on them.
var serverResources = map[string]string{
	"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
	"ReplicaSet": "replicasets", "CronJob": "cronjobs",
}

// serverChecks is what the checks on the API server cover, for the message
// of a run that skips them.
const serverChecks = "Do and Undo on a Deployment, StatefulSet, DaemonSet, ReplicaSet and CronJob as the kube-apiserver stores them " +
	"(its defaults filled in) and patched through it (its validation of each patch)"

// serverOrSkip returns the shared control plane, started on first use.
// Without binaries it skips t, saying what the skip leaves unchecked and
// the fastest way to get them; under CI=true it fails t.
func serverOrSkip(t *testing.T, shared *envtest.Shared) *envtest.Environment {
	t.Helper()
	env, err := shared.Start()
	switch {
	case err == nil:
		return env
	case errors.Is(err, envtest.ErrBinariesMissing) && !envtest.InCI():
		t.Skipf("skipped (the checks without a server ran and passed): %s.\n%v", serverChecks, err)
	default:
		t.Fatalf("bindingtest: start the control plane for the contract's checks on the API server: %v", err)
	}
	return nil
}

// onServer checks the contract on the built-in subjects the reconciler
// patches, as the kube-apiserver of env stores them, each in a namespace
// of its own.
func (k *contract) onServer(t *testing.T, env *envtest.Environment, subjects []Subject) {
	t.Helper()
	ns := env.CreateNamespace(t, "bindingtest-contract-")
	client, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("bindingtest: client of the control plane: %v", err)
	}
	for _, s := range subjects {
		if _, ok := serverResources[s.Object.GetKind()]; !ok || s.Object.GroupVersionKind().Group == CustomWorkloadKind.Group {
			continue
		}
		c := &subjectCheck{contract: k, s: s, where: " on the subject as the API server stores it"}
		c.serverSubject(client, ns)
	}
}

// serverSubject checks the contract on one built-in subject as the
// kube-apiserver stores it: created for real in namespace ns (so the
// server fills in its defaults), then bound and unbound with the JSON
// patches the reconciler sends.
func (c *subjectCheck) serverSubject(client dynamic.Interface, ns string) {
	gvk := c.s.Object.GroupVersionKind()
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: serverResources[gvk.Kind]}
	obj := c.s.Object.DeepCopy()
	stripForCreate(obj.Object)
	obj.SetNamespace(ns)
	obj.SetName("contract-" + strings.ToLower(gvk.Kind))
	res := client.Resource(gvr).Namespace(ns)
	stored, err := res.Create(c.ctx, obj, metav1.CreateOptions{})
	if err != nil {
		c.broke("server create", "create the subject on the API server: %v", err)
		return
	}
	before, err := c.s.Shape.FromUnstructured(stored)
	if err != nil {
		c.broke("server decode", "decode the stored subject through shape %s: %v", c.s.Shape, err)
		return
	}
	if !c.undoUnbound(before) {
		return
	}
	after := before.DeepCopy()
	if p := c.do(after); p != nil {
		c.panicked(p)
		return
	}
	bound, ok := c.serverPatch(res, "Do", stored, c.createPatch(before, after))
	if !ok {
		return
	}
	reBound, err := c.s.Shape.FromUnstructured(bound)
	if err != nil {
		c.broke("server decode", "decode the bound subject: %v", err)
		return
	}
	c.keepsDefaults(reBound)
	unbound := reBound.DeepCopy()
	if p := c.undo(unbound); p != nil {
		c.panicked(p)
		return
	}
	restored, ok := c.serverPatch(res, "Undo", bound, c.createPatch(reBound, unbound))
	if !ok {
		return
	}
	got, err := c.s.Shape.FromUnstructured(restored)
	if err != nil {
		c.broke("server decode", "decode the unbound subject: %v", err)
		return
	}
	// The pod templates only: the server writes annotations of its own on
	// the object when its template changes (a DaemonSet's template
	// generation); the object's labels and annotations were checked
	// without a server.
	if diff := changesOf(duck.Pod(), templateOnly(before), templateOnly(got)); len(diff) > 0 {
		c.broke("restore", "Undo breaks its promise to restore the subject Do bound%s: after Do, Undo\n%s\n"+
			"fix: remove exactly what Do adds, found by name (or mountPath), everywhere Do adds it", c.where, undoLeft(diff))
	}
}

// serverPatch sends ops, guarded as the reconciler guards them, and
// returns the object the server stored; a refusal is reported.
func (c *subjectCheck) serverPatch(res dynamic.ResourceInterface, what string, base *unstructured.Unstructured, ops []jsonpatch.Operation) (*unstructured.Unstructured, bool) {
	if len(ops) == 0 {
		return base, true
	}
	guarded, err := guardOps(base.Object, ops)
	if err != nil {
		c.broke("server patch", "%s: guard the patch: %v\npatch:\n%s", what, err, formatOpsMax(c.s.Shape, ops, 6))
		return nil, false
	}
	out, err := res.Patch(c.ctx, base.GetName(), types.JSONPatchType, guarded, metav1.PatchOptions{})
	if err != nil {
		c.broke("server patch", "%s's patch is refused by the API server%s: %v\npatch:\n%s\n"+
			"fix: make what %s writes valid as the API server validates it (the field it names above)",
			what, c.where, err, formatOpsMax(c.s.Shape, ops, 6), what)
		return nil, false
	}
	return out, true
}

// keepsDefaults checks that Do on the subject it bound, as the server
// stores it, changes nothing: a Do that drops a value the server fills in
// is told so, any other change is Do not being idempotent.
func (c *subjectCheck) keepsDefaults(reBound *duck.WithPod) {
	again := reBound.DeepCopy()
	if p := c.do(again); p != nil {
		c.panicked(p)
		return
	}
	ops := c.createPatch(reBound, again)
	if len(ops) == 0 {
		return
	}
	dropped := droppedDefaults(c.s.Shape, ops)
	if len(dropped) == 0 {
		c.broke("idempotent", "Do breaks its promise to be idempotent%s: on the subject it bound, Do changes it again:\n%s\n"+
			"fix: look for what Do adds (by name) before adding it, and change it in place when it is there", c.where, formatOpsMax(c.s.Shape, ops, 6))
		return
	}
	fix := "fix: change the fields you bind in place; do not delete and re-append a container, volume or env var"
	if _, ok := c.b.(declarative.Declarer); ok {
		fix = "fix: set these fields in the Spec to the values the server stores"
	}
	c.broke("server defaults", "Do breaks its promise to be idempotent%s: after Do's patch the server fills in %s, and Do removes it again, so the reconciler patches the subject forever\n%s\npatch of Do again:\n%s",
		c.where, strings.Join(dropped, ", "), fix, formatOpsMax(c.s.Shape, ops, 6))
}

// templateOnly is wp's pod template alone.
func templateOnly(wp *duck.WithPod) *duck.WithPod {
	return &duck.WithPod{Spec: duck.WithPodSpec{Template: wp.Spec.Template}}
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
