package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/tracker"
)

// bindingsCategory is the kubectl category every Binding kind is in
// (`kubectl get bindings`): bindkit's examples and the kinds `bindkit
// new` scaffolds declare it (+kubebuilder:resource:categories=bindings).
const bindingsCategory = "bindings"

// whyNotApplied reads every Binding of w's namespace that w does not
// record and decides why it does not apply (whyNot), sorted by name;
// unread names the kinds whose Bindings could not be listed, and why.
func whyNotApplied(ctx context.Context, o *options, w *object) (out []whyNotEntry, unread []string, err error) {
	kinds, err := bindingKinds(o.cluster)
	if err != nil {
		return nil, nil, err
	}
	facts := workloadFacts{Kind: w.kind.GroupKind(), Namespace: w.u.GetNamespace(), Name: w.u.GetName(), Labels: w.u.GetLabels()}
	nsObj, err := o.cluster.dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, facts.Namespace, metav1.GetOptions{})
	if err == nil {
		facts.NamespaceLabels = nsObj.GetLabels()
	}
	records := recordedKeys(w.u.GetAnnotations())
	for _, gvr := range kinds {
		list, err := o.cluster.dynamic.Resource(gvr).Namespace(facts.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			unread = append(unread, fmt.Sprintf("%s: %v", gvr.GroupResource(), err))
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list %s in namespace %s: %w", gvr.GroupResource(), facts.Namespace, err)
		}
		gvk, err := o.cluster.mapper.KindFor(gvr)
		if err != nil {
			return nil, nil, fmt.Errorf("kind of %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			b := &list.Items[i]
			if records[gvr.GroupResource().String()+"/"+b.GetName()] {
				continue
			}
			selects, reasons := whyNot(candidateOf(b), facts)
			out = append(out, whyNotEntry{Binding: refName(gvk.GroupKind(), b.GetName()), Selects: selects, Reasons: reasons,
				RequestedBy: b.GetAnnotations()[policy.RequestedByAnnotation]})
		}
	}
	slices.SortFunc(out, func(a, b whyNotEntry) int { return cmp.Compare(a.Binding, b.Binding) })
	return out, unread, nil
}

// recordedKeys are the Bindings w's records name, as
// "<resource>.<group>/<name>".
func recordedKeys(annotations map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, set := range []map[duck.BoundBy]int64{duck.BoundOf(annotations), duck.HeldOf(annotations)} {
		for by := range set {
			out[by.Resource.String()+"/"+by.Name] = true
		}
	}
	for by := range duck.ChangesOf(annotations) {
		out[by.Resource.String()+"/"+by.Name] = true
	}
	return out
}

// candidateOf reads what whyNot needs of the Binding b.
func candidateOf(b *unstructured.Unstructured) candidate {
	c := candidate{Name: b.GetName(), Namespace: b.GetNamespace(), Generation: b.GetGeneration(),
		Deleting: b.GetDeletionTimestamp() != nil, Paused: pausedOf(b), Undo: undoRequested(b)}
	st := statusOf(b)
	c.ObservedGeneration, c.Ready = st.ObservedGeneration, st.GetCondition(duck.ConditionReady)
	path := strings.Split(policy.DefaultSubjectPath, ".")
	raw, ok, err := unstructured.NestedMap(b.Object, path...)
	switch {
	case err != nil:
		c.SubjectErr = err
	case ok:
		var ref tracker.Reference
		js, _ := json.Marshal(raw)
		if err := json.Unmarshal(js, &ref); err != nil {
			c.SubjectErr = fmt.Errorf("%s: %w", policy.DefaultSubjectPath, err)
		} else {
			c.Subject = &ref
		}
	}
	return c
}

// bindingKinds are the namespaced resources of kubectl's "bindings"
// category, at the versions the server prefers. A discovery cache that
// knows none is refreshed once: a kind installed since it was written.
func bindingKinds(c *cluster) ([]schema.GroupVersionResource, error) {
	kinds, err := categoryResources(c.discovery, bindingsCategory)
	if len(kinds) == 0 && err == nil {
		if cached, ok := c.discovery.(discovery.CachedDiscoveryInterface); ok && !cached.Fresh() {
			cached.Invalidate()
			kinds, err = categoryResources(c.discovery, bindingsCategory)
		}
	}
	return kinds, err
}

// categoryResources lists the namespaced resources of category. A group
// whose discovery failed is left out when others answered (an
// aggregated API that is down); a discovery that failed whole is the
// error.
func categoryResources(d discovery.DiscoveryInterface, category string) ([]schema.GroupVersionResource, error) {
	lists, err := discovery.ServerPreferredNamespacedResources(d)
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discover the Binding kinds (category %q): %w", category, err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if slices.Contains(r.Categories, category) && !strings.Contains(r.Name, "/") && slices.Contains(r.Verbs, "list") {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out, nil
}
