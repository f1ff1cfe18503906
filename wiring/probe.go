package wiring

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// prober asks the kube-apiserver, by a server-side dry run, which
// admission path of a declarative kind is in force: it picks a Binding
// that has published its Spec and names subjects of a built-in kind, and
// dry-runs the create of an object that Binding names (or, when the
// Binding names an object that exists, a patch of it that takes the
// Binding's record away), labelled psbinding.ProbeLabel. The policy, in
// force, records the Binding at its published generation on the result;
// the webhook, called, marks it with psbinding.ProbeAnswerAnnotation and
// changes nothing else. Nothing is stored. It needs create on the
// subjects' kinds, and get and patch on a kind whose existing object a
// Binding names: a dry run is authorized as the write it simulates. It
// reads namespaces from the process's slim namespaces cache (list and
// watch, which every bindkit process has), never with a get.
type prober struct {
	// namespaces is the cache of the namespaces' metadata (exclude
	// label, deletion), shared with the reconcilers.
	namespaces duck.InformerFactory
	dyn        dynamic.Interface
	mapper     meta.RESTMapper
	resource   schema.GroupResource // the Bindings'
	list       psbinding.ListAll
	// excluded says whether admission never acts in a namespace.
	excluded func(ns string) bool
	// fieldManager names the probe's writes: not the reconciler's, whose
	// patches both paths skip.
	fieldManager string
	// specPath, for a kind whose users write its Spec in the Binding
	// (declarative.InBinding), is where: the policy applies it at the
	// Binding's generation, published or not.
	specPath string
	// faults reports the rounds the kube-apiserver refused.
	faults *probeFaults
	// namespaceWait bounds the wait for the namespaces' cache. Default:
	// namespaceSyncWait.
	namespaceWait time.Duration
}

// probeResult is what one probe saw.
type probeResult struct {
	binding                      string // namespace/name of the Binding probed with
	policyApplied, webhookCalled bool
}

// probe dry-runs one object; ok is false when no Binding can be probed
// with (none is published, or none names a built-in kind where admission
// acts): then there is nothing to admit either. A refusal (see refused)
// is an error, whatever else was probed.
func (p *prober) probe(ctx context.Context) (res probeResult, ok bool, err error) {
	res, probed, err := p.probeWhile(ctx, func(psbinding.Bindable) bool { return true }, func(probeResult) bool { return false })
	return res, probed > 0, err
}

// probeEach probes with every Binding want accepts that can be probed
// with, until one shows the policy not applied: res.policyApplied says
// whether all did, probed how many were probed.
func (p *prober) probeEach(ctx context.Context, want func(psbinding.Bindable) bool) (res probeResult, probed int, err error) {
	return p.probeWhile(ctx, want, func(r probeResult) bool { return r.policyApplied })
}

// probeWhile probes with the Bindings want accepts, in namespace and name
// order, for as long as more says of the last result. A Binding whose
// probe fails for a reason of its own (its namespace is going away, the
// kube-apiserver is slow to answer) does not hold the handover back
// while another can be probed with: that error is reported only when
// none could. A probe the kube-apiserver refuses (see refused: the
// process may not read or dry-run what the probe needs) is always
// reported, as a *refusal naming every Binding refused: the handover
// cannot tell where that Binding's subjects are admitted, and an operator
// must act. A Binding whose namespace the cache has not seen yet (new
// beside its Binding) holds the round too, with an error: it is not gone,
// and its subjects are not yet seen admitted. res is the first result
// that stopped it, else the first.
func (p *prober) probeWhile(ctx context.Context, want func(psbinding.Bindable) bool, more func(probeResult) bool) (res probeResult, probed int, err error) {
	bindings, err := p.list()
	if err != nil {
		return probeResult{}, 0, err
	}
	slices.SortFunc(bindings, func(a, b psbinding.Bindable) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	var (
		failed, held error
		refusal      refusal
	)
	fail := func(b psbinding.Bindable, err error) {
		err = fmt.Errorf("probe with binding %s/%s: %w", b.GetNamespace(), b.GetName(), err)
		switch {
		case refused(err):
			refusal.add(b, err)
		case errors.Is(err, errNamespaceNotCached):
			held = cmp.Or(held, err)
		case failed == nil:
			failed = err
		}
	}
	for _, b := range bindings {
		if !want(b) {
			continue
		}
		target, published, err := p.target(ctx, b)
		if err != nil {
			fail(b, err)
			continue
		}
		if !published {
			continue
		}
		got, err := p.dryRun(ctx, target)
		if err != nil {
			fail(b, err)
			continue
		}
		by := duck.BoundBy{Resource: p.resource, Name: b.GetName(), UID: b.GetUID()}
		gen, recorded := duck.BoundGeneration(got.GetAnnotations(), by)
		r := probeResult{
			binding:       b.GetNamespace() + "/" + b.GetName(),
			policyApplied: recorded && gen == target.generation,
			webhookCalled: got.GetAnnotations()[psbinding.ProbeAnswerAnnotation] == psbinding.ProbeAnswerWebhook,
		}
		if probed++; probed == 1 {
			res = r
		}
		if !more(r) {
			return r, probed, cmp.Or(refusal.err(), held)
		}
	}
	if err := cmp.Or(refusal.err(), held); err != nil {
		return res, probed, err
	}
	if probed == 0 {
		return probeResult{}, 0, failed
	}
	return res, probed, nil
}

// probeTarget is the object a probe dry-runs, for one Binding.
type probeTarget struct {
	gvr        schema.GroupVersionResource
	obj        *unstructured.Unstructured
	by         duck.BoundBy
	generation int64 // published
}

// target builds the probe object for b, when b has published a Spec and
// names subjects the policy binds, in a namespace where admission acts
// (published false otherwise: nothing to probe with b). An error is a
// probe that could not be built: its namespace unread, say.
func (p *prober) target(ctx context.Context, b psbinding.Bindable) (_ probeTarget, published bool, _ error) {
	if b.GetDeletionTimestamp() != nil || p.excluded(b.GetNamespace()) {
		return probeTarget{}, false, nil
	}
	gen, applied := p.applied(b)
	if !applied {
		return probeTarget{}, false, nil
	}
	ref := b.GetSubject()
	if (ref.Namespace != "" && ref.Namespace != b.GetNamespace()) || (ref.Selector != nil && len(ref.Selector.MatchExpressions) > 0) {
		return probeTarget{}, false, nil
	}
	gvk, err := ref.GroupVersionKind()
	if err != nil {
		return probeTarget{}, false, nil
	}
	mapping, err := p.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return probeTarget{}, false, nil // a kind the kube-apiserver does not serve: the policy binds none
	}
	ns, err := p.namespace(ctx, b.GetNamespace())
	if err != nil {
		return probeTarget{}, false, err
	}
	if ns.GetLabels()[psbinding.ExcludeLabel] == "true" || ns.GetDeletionTimestamp() != nil {
		return probeTarget{}, false, nil // excluded or going: nothing is admitted there
	}
	obj, err := probeObject(gvk, b.GetNamespace(), ref)
	if err != nil {
		return probeTarget{}, false, err
	}
	return probeTarget{gvr: mapping.Resource, obj: obj, by: duck.BoundBy{Resource: p.resource, Name: b.GetName(), UID: b.GetUID()}, generation: gen}, true, nil
}

// errNamespaceNotCached: the namespaces' cache has not seen a Binding's
// namespace yet.
var errNamespaceNotCached = errors.New("not in the namespaces' cache yet")

// namespacesGVR is the resource of the namespaces the probe reads.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// namespaceSyncWait bounds the wait for the namespaces' cache, which the
// reconcilers have usually filled long before: a cache that does not
// sync (list or watch of namespaces refused) fails the probe rather than
// holding it.
const namespaceSyncWait = 30 * time.Second

// namespace returns the metadata of the namespace name from the cache;
// one the cache has not seen is errNamespaceNotCached.
func (p *prober) namespace(ctx context.Context, name string) (metav1.Object, error) {
	wait, cancel := context.WithTimeout(ctx, cmp.Or(p.namespaceWait, namespaceSyncWait))
	defer cancel()
	_, lister, err := p.namespaces.Get(wait, namespacesGVR)
	if err != nil {
		if ctx.Err() == nil {
			// Not this probe's end but the cache's: a fault.
			err = fmt.Errorf("%w: %w", errNamespacesUnsynced, err)
		}
		return nil, fmt.Errorf("read namespace %s: %w", name, err)
	}
	obj, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		// A Binding's namespace exists while the Binding does (deleting a
		// namespace deletes its Bindings first): the cache lags.
		return nil, fmt.Errorf("read namespace %s: %w", name, errNamespaceNotCached)
	}
	if err != nil {
		return nil, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return meta.Accessor(obj)
}

// applied says whether the policy applies b, and at which generation: the
// one its Spec was published at, or, for a kind whose users write the
// Spec in the Binding (specPath), the Binding's own, unless its
// controller reported that generation invalid (as the policy's condition
// says, policy.MutatingPolicyOptions.SpecPath).
func (p *prober) applied(b psbinding.Bindable) (int64, bool) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return 0, false
	}
	if p.specPath == "" {
		gen, _, _ := unstructured.NestedInt64(content, "status", "declaredGeneration")
		_, has, _ := unstructured.NestedMap(content, "status", "declared")
		return gen, has && gen > 0
	}
	if _, has, _ := unstructured.NestedMap(content, strings.Split(p.specPath, ".")...); !has || b.GetGeneration() <= 0 {
		return 0, false
	}
	observed, _, _ := unstructured.NestedInt64(content, "status", "observedGeneration")
	if ready := meta.FindStatusCondition(b.GetBindingStatus().GetConditions(), duck.ConditionReady); ready != nil &&
		ready.Reason == psbinding.ReasonBindingInvalid && observed == b.GetGeneration() {
		return 0, false
	}
	return b.GetGeneration(), true
}

// dryRun creates the target's object in a dry run; when the Binding names
// an object that exists, it patches that one instead, taking the
// Binding's record away so that the policy's shows.
func (p *prober) dryRun(ctx context.Context, t probeTarget) (*unstructured.Unstructured, error) {
	client := p.dyn.Resource(t.gvr).Namespace(t.obj.GetNamespace())
	dry := []string{metav1.DryRunAll}
	got, err := client.Create(ctx, t.obj, metav1.CreateOptions{DryRun: dry, FieldManager: p.fieldManager})
	if !apierrors.IsAlreadyExists(err) {
		return got, err
	}
	cur, err := client.Get(ctx, t.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	bound := duck.BoundOf(cur.GetAnnotations())
	for e := range bound {
		if e.Matches(t.by) {
			delete(bound, e)
		}
	}
	var boundValue any = bound.String()
	if len(bound) == 0 {
		boundValue = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{psbinding.ProbeLabel: t.obj.GetLabels()[psbinding.ProbeLabel]},
		"annotations": map[string]any{duck.BoundAnnotation: boundValue, probeNonceAnnotation: t.obj.GetLabels()[psbinding.ProbeLabel]},
	}})
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, t.obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: dry, FieldManager: p.fieldManager})
}

// probeNonceAnnotation is on every probe object, so that the webhook's
// answer, an annotation, always has annotations to go into.
const probeNonceAnnotation = "bindings.bindkit.dev/probe-nonce"

// probeObject is an object of kind gvk in ns that ref names: its name, or
// a fresh name with the selector's labels. Its pods would run a pause
// container as the restricted Pod Security Standard asks; it is only ever
// dry-run.
func probeObject(gvk schema.GroupVersionKind, ns string, ref tracker.Reference) (*unstructured.Unstructured, error) {
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(nonce[:])
	labels := map[string]string{psbinding.ProbeLabel: id}
	if ref.Selector != nil {
		maps.Copy(labels, ref.Selector.MatchLabels)
	}
	name := ref.Name
	if name == "" {
		name = "bindkit-probe-" + id
	}
	om := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: map[string]string{probeNonceAnnotation: id}}
	podLabels := map[string]string{"bindkit-probe": id}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: probePodSpec()}
	selector := &metav1.LabelSelector{MatchLabels: podLabels}
	var obj runtime.Object
	switch gvk.GroupKind() {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		obj = &appsv1.Deployment{ObjectMeta: om, Spec: appsv1.DeploymentSpec{Selector: selector, Template: template}}
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		obj = &appsv1.StatefulSet{ObjectMeta: om, Spec: appsv1.StatefulSetSpec{Selector: selector, Template: template}}
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		obj = &appsv1.DaemonSet{ObjectMeta: om, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template}}
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		obj = &appsv1.ReplicaSet{ObjectMeta: om, Spec: appsv1.ReplicaSetSpec{Selector: selector, Template: template}}
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		template.Spec.RestartPolicy = corev1.RestartPolicyNever
		obj = &batchv1.Job{ObjectMeta: om, Spec: batchv1.JobSpec{Template: template}}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		template.Spec.RestartPolicy = corev1.RestartPolicyNever
		obj = &batchv1.CronJob{ObjectMeta: om, Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}}
	case schema.GroupKind{Kind: "Pod"}:
		om.Labels = labels
		obj = &corev1.Pod{ObjectMeta: om, Spec: probePodSpec()}
	default:
		return nil, fmt.Errorf("no probe object for %s", gvk.GroupKind())
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// probePodSpec is a pause container under the restricted Pod Security
// Standard.
func probePodSpec() corev1.PodSpec {
	no, yes := false, true
	return corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, RunAsNonRoot: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	}
}
