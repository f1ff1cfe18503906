package psbinding

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/bindkit/bindkit/tracker"
)

// index answers "which Bindings apply to this subject?" for the admission
// path. It is built once per reconcile from the listed Bindings and never
// changed afterwards, so lookups need no lock: the admission controller swaps
// a whole new index in atomically.
type index[B any] struct {
	exact     map[exactKey][]indexed[B]
	selectors map[scopeKey]*selectorSet[B]
	// scopes counts the Bindings of each subject kind and namespace, so the
	// common case (no Binding anywhere near the request) is one map lookup.
	scopes map[scopeKey]struct{}
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

// labelPair is one key=value a selector requires, used to narrow a lookup to
// the selectors an object's labels could satisfy.
type labelPair struct{ key, value string }

// indexed is one Binding with its parsed selector and its place in the
// deterministic order.
type indexed[B any] struct {
	binding  B
	order    string // namespace/name of the Binding: the order Do and Undo run in
	selector labels.Selector
}

// selectorSet holds the selector Bindings of one scope: those with an
// equality requirement by that pair, the rest in fallback.
type selectorSet[B any] struct {
	byPair   map[labelPair][]indexed[B]
	fallback []indexed[B]
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
		selectors: make(map[scopeKey]*selectorSet[B]),
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
		}
	}
	for k, list := range ix.exact {
		ix.exact[k] = sortIndexed(list)
	}
	for _, set := range ix.selectors {
		for k, list := range set.byPair {
			set.byPair[k] = sortIndexed(list)
		}
		set.fallback = sortIndexed(set.fallback)
	}
	return ix, errs
}

func (ix *index[B]) add(b B, ref tracker.Reference, order string) error {
	if err := ref.Validate(); err != nil {
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
	sel, err := ref.LabelSelector()
	if err != nil {
		return err
	}
	set := ix.selectors[scope]
	if set == nil {
		set = &selectorSet[B]{byPair: make(map[labelPair][]indexed[B])}
		ix.selectors[scope] = set
	}
	entry := indexed[B]{binding: b, order: order, selector: sel}
	pairs := indexPairs(sel)
	if len(pairs) == 0 {
		set.fallback = append(set.fallback, entry)
	}
	for _, p := range pairs {
		set.byPair[p] = append(set.byPair[p], entry)
	}
	return nil
}

// indexPairs picks one requirement every matching object must satisfy with
// a known value, and returns its key=value pairs (one per allowed value). An
// object carries at most one value per key, so it reaches the entry through
// at most one pair. Nil means no requirement narrows the selector.
func indexPairs(sel labels.Selector) []labelPair {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			values := r.Values().List() // sorted, so the pick is deterministic
			pairs := make([]labelPair, len(values))
			for i, v := range values {
				pairs[i] = labelPair{key: r.Key(), value: v}
			}
			return pairs
		}
	}
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
		for k, v := range objLabels {
			for _, e := range set.byPair[labelPair{key: k, value: v}] {
				if e.selector.Matches(have) {
					found = append(found, e)
				}
			}
		}
		for _, e := range set.fallback {
			if e.selector.Matches(have) {
				found = append(found, e)
			}
		}
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
