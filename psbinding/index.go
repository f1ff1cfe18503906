package psbinding

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/tracker"
)

// index answers "which Bindings apply to this subject?" for the admission
// path. It is built once per reconcile from the listed Bindings and never
// changed afterwards, so lookups need no lock: the admission controller swaps
// a whole new index in atomically.
type index[B any] struct {
	exact     map[exactKey][]indexed[B]
	selectors map[scopeKey]*tracker.SelectorIndex[string, indexed[B]]
	// scopes counts the Bindings of each subject kind and namespace, so the
	// common case (no Binding anywhere near the request) is one map lookup.
	scopes map[scopeKey]struct{}
	// filed are the Bindings filed, in the order listed: those admission
	// may apply, and so the only ones the webhook's scope needs to cover.
	filed []B
}

// scopeKey is a subject kind in a namespace.
type scopeKey struct {
	group, kind, namespace string
}

// exactKey is one subject named by a Binding.
type exactKey struct {
	scopeKey
	name string
}

// indexed is one Binding with its place in the deterministic order.
type indexed[B any] struct {
	binding B
	order   string // namespace/name of the Binding: the order Do and Undo run in
}

// subjectOf is what the index needs to know of a Binding: its subject
// reference and its name for ordering.
type subjectOf[B any] func(B) (ref tracker.Reference, namespace, name string)

// newIndex indexes bindings by subject. A Binding whose reference does not
// validate, or leaves the Binding's namespace, is left out and reported in
// the returned errors, so one bad Binding does not stop the others from
// applying.
func newIndex[B any](bindings []B, subject subjectOf[B]) (*index[B], []error) {
	ix := &index[B]{
		exact:     make(map[exactKey][]indexed[B]),
		selectors: make(map[scopeKey]*tracker.SelectorIndex[string, indexed[B]]),
		scopes:    make(map[scopeKey]struct{}),
	}
	var errs []error
	for _, b := range bindings {
		ref, ns, name := subject(b)
		// A Binding that reaches out of its namespace is never filed, so
		// admission never applies it anywhere.
		if err := checkSubjectNamespace(ns, name, ref); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := ix.add(b, ref, ns+"/"+name); err != nil {
			errs = append(errs, fmt.Errorf("binding %s/%s: subject %s: %w", ns, name, ref, err))
			continue
		}
		ix.filed = append(ix.filed, b)
	}
	for k, list := range ix.exact {
		ix.exact[k] = sortIndexed(list)
	}
	return ix, errs
}

func (ix *index[B]) add(b B, ref tracker.Reference, order string) error {
	// One parse of the selector: the index is rebuilt on every change of
	// any Binding, so this runs for every Binding that many times.
	sel, err := ref.Parse()
	if err != nil {
		return err
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return err
	}
	scope := scopeKey{group: gv.Group, kind: ref.Kind, namespace: ref.Namespace}
	ix.scopes[scope] = struct{}{}
	if ref.Selector == nil {
		key := exactKey{scopeKey: scope, name: ref.Name}
		ix.exact[key] = append(ix.exact[key], indexed[B]{binding: b, order: order})
		return nil
	}
	set := ix.selectors[scope]
	if set == nil {
		set = tracker.NewSelectorIndex[string, indexed[B]]()
		ix.selectors[scope] = set
	}
	set.Set(sel, order, indexed[B]{binding: b, order: order})
	return nil
}

func sortIndexed[B any](list []indexed[B]) []indexed[B] {
	slices.SortStableFunc(list, func(a, b indexed[B]) int { return cmp.Compare(a.order, b.order) })
	return list
}

// inScope reports whether any Binding names subjects of this kind in this
// namespace. When it is false no lookup can match, and the object need not
// be decoded.
func (ix *index[B]) inScope(group, kind, namespace string) bool {
	_, ok := ix.scopes[scopeKey{group: group, kind: kind, namespace: namespace}]
	return ok
}

// lookup returns the Bindings that apply to the object, in the order their
// Do and Undo must run: sorted by Binding namespace/name, whatever order they
// were listed in.
func (ix *index[B]) lookup(group, kind, namespace, name string, objLabels map[string]string) []B {
	scope := scopeKey{group: group, kind: kind, namespace: namespace}
	var found []indexed[B]
	if name != "" {
		found = append(found, ix.exact[exactKey{scopeKey: scope, name: name}]...)
	}
	if set := ix.selectors[scope]; set != nil {
		have := labels.Set(objLabels)
		set.Candidates(objLabels, func(sel labels.Selector, _ string, bindings map[string]indexed[B]) {
			if sel.Matches(have) {
				for _, e := range bindings {
					found = append(found, e)
				}
			}
		})
	}
	if len(found) == 0 {
		return nil
	}
	sortIndexed(found)
	out := make([]B, len(found))
	for i, e := range found {
		out[i] = e.binding
	}
	return out
}
