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
// path. It is built from the listed Bindings at each reconcile and never
// changed afterwards, so lookups need no lock: the admission controller swaps
// a whole new index in atomically.
//
// The admission controller rebuilds it at every change of any Binding, so
// a build reuses what the previous one made wherever it can (rebuild): a
// Binding's parsed subject while its resourceVersion holds, a scope's
// sub-index while its Bindings are the same. With one Binding per
// namespace, a change costs one scope's work and a walk of the list, not
// a parse of every Binding's selector.
type index[B any] struct {
	// scopes holds a sub-index per subject kind and namespace named by a
	// Binding, so the common case (no Binding anywhere near the request)
	// is one map lookup.
	scopes map[scopeKey]*scopeIndex[B]
	// filed are the Bindings filed, in the order listed: those admission
	// may apply, and so the only ones the webhook's scope needs to cover.
	filed []B
	// parsed is each listed Binding's subject as parsed, for the next
	// build.
	parsed map[bindingKey]parsedSubject
}

// scopeIndex is the Bindings of one subject kind in one namespace.
type scopeIndex[B any] struct {
	exact     map[string][]indexed[B] // by subject name, in Binding order
	selectors *tracker.SelectorIndex[string, indexed[B]]
	// members identify the Bindings filed here, sorted: equal members mean
	// an equal sub-index.
	members []member
}

// member is one Binding in a scope, at a resourceVersion.
type member struct {
	bindingKey
	version string
}

// bindingKey is a Binding's namespace and name.
type bindingKey struct{ namespace, name string }

// parsedSubject is one Binding's subject reference, checked and parsed.
type parsedSubject struct {
	version string // the Binding's resourceVersion when parsed
	scope   scopeKey
	name    string          // a named subject
	sel     labels.Selector // a selector's, parsed once
	err     error           // why the Binding is not filed
}

// scopeKey is a subject kind in a namespace.
type scopeKey struct {
	group, kind, namespace string
}

// indexed is one Binding with its place in the deterministic order.
type indexed[B any] struct {
	binding B
	order   string // namespace/name of the Binding: the order Do and Undo run in
}

// subjectOf is what the index needs to know of a Binding: its subject
// reference, its namespace and name for ordering, and its resourceVersion
// ("" when it has none: never taken as unchanged).
type subjectOf[B any] func(B) (ref tracker.Reference, namespace, name, version string)

// newIndex indexes bindings by subject. A Binding whose reference does not
// validate, or leaves the Binding's namespace, is left out and reported in
// the returned errors, so one bad Binding does not stop the others from
// applying.
func newIndex[B any](bindings []B, subject subjectOf[B]) (*index[B], []error) {
	return (*index[B])(nil).rebuild(bindings, subject)
}

// rebuild is newIndex reusing prev (which may be nil): a Binding whose
// resourceVersion is the one prev parsed is not parsed again, and a scope
// whose Bindings and their versions are prev's keeps prev's sub-index,
// Bindings and all (the same versions are the same objects). prev is not
// changed.
func (prev *index[B]) rebuild(bindings []B, subject subjectOf[B]) (*index[B], []error) {
	ix := &index[B]{
		scopes: make(map[scopeKey]*scopeIndex[B], prev.scopeCount()),
		parsed: make(map[bindingKey]parsedSubject, len(bindings)),
		filed:  make([]B, 0, len(bindings)),
	}
	var errs []error
	// The Bindings to file, grouped by scope and ordered within it: one
	// slice and one sort, however many scopes.
	type filing struct {
		scope scopeKey
		member
		binding B
	}
	filings := make([]filing, 0, len(bindings))
	for _, b := range bindings {
		ref, ns, name, version := subject(b)
		key := bindingKey{namespace: ns, name: name}
		p, ok := prev.parsedAs(key, version)
		if !ok {
			p = parseSubject(ref, ns, name, version)
		}
		ix.parsed[key] = p
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		filings = append(filings, filing{scope: p.scope, member: member{bindingKey: key, version: version}, binding: b})
		ix.filed = append(ix.filed, b)
	}
	slices.SortFunc(filings, func(a, b filing) int {
		return cmp.Or(cmp.Compare(a.scope.namespace, b.scope.namespace), cmp.Compare(a.scope.group, b.scope.group),
			cmp.Compare(a.scope.kind, b.scope.kind), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	for start := 0; start < len(filings); {
		scope := filings[start].scope
		end := start + 1
		for end < len(filings) && filings[end].scope == scope {
			end++
		}
		group := filings[start:end]
		start = end
		if old := prev.scopeOf(scope); old != nil && slices.EqualFunc(old.members, group, func(m member, f filing) bool {
			return m == f.member && m.version != ""
		}) {
			// The same Bindings at the same versions: the same objects.
			ix.scopes[scope] = old
			continue
		}
		sc := &scopeIndex[B]{members: make([]member, len(group))}
		for i, f := range group {
			sc.members[i] = f.member
			sc.add(indexed[B]{binding: f.binding, order: f.namespace + "/" + f.name}, ix.parsed[f.bindingKey])
		}
		ix.scopes[scope] = sc
	}
	return ix, errs
}

// scopeCount is how many scopes prev holds (0 for none): the next index's
// likely size.
func (prev *index[B]) scopeCount() int {
	if prev == nil {
		return 0
	}
	return len(prev.scopes)
}

// parsedAs returns what prev parsed of the Binding key at version.
func (prev *index[B]) parsedAs(key bindingKey, version string) (parsedSubject, bool) {
	if prev == nil || version == "" {
		return parsedSubject{}, false
	}
	p, ok := prev.parsed[key]
	return p, ok && p.version == version
}

func (prev *index[B]) scopeOf(scope scopeKey) *scopeIndex[B] {
	if prev == nil {
		return nil
	}
	return prev.scopes[scope]
}

// parseSubject checks and parses one Binding's subject reference. A
// Binding that reaches out of its namespace is never filed, so admission
// never applies it anywhere.
func parseSubject(ref tracker.Reference, ns, name, version string) parsedSubject {
	p := parsedSubject{version: version}
	if err := checkSubjectNamespace(ns, name, ref); err != nil {
		p.err = err
		return p
	}
	sel, err := ref.Parse()
	if err == nil {
		var gv schema.GroupVersion
		if gv, err = schema.ParseGroupVersion(ref.APIVersion); err == nil {
			p.scope = scopeKey{group: gv.Group, kind: ref.Kind, namespace: ref.Namespace}
		}
	}
	if err != nil {
		p.err = fmt.Errorf("binding %s/%s: subject %s: %w", ns, name, ref, err)
		return p
	}
	if ref.Selector == nil {
		p.name = ref.Name
	} else {
		p.sel = sel
	}
	return p
}

// add files one Binding, listed in order, in its scope.
func (sc *scopeIndex[B]) add(e indexed[B], p parsedSubject) {
	if p.sel == nil {
		if sc.exact == nil {
			sc.exact = map[string][]indexed[B]{}
		}
		sc.exact[p.name] = append(sc.exact[p.name], e)
		return
	}
	if sc.selectors == nil {
		sc.selectors = tracker.NewSelectorIndex[string, indexed[B]]()
	}
	sc.selectors.Set(p.sel, e.order, e)
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
	sc := ix.scopes[scopeKey{group: group, kind: kind, namespace: namespace}]
	if sc == nil {
		return nil
	}
	var found []indexed[B]
	if name != "" {
		found = append(found, sc.exact[name]...)
	}
	if sc.selectors != nil {
		have := labels.Set(objLabels)
		sc.selectors.Candidates(objLabels, func(sel labels.Selector, _ string, bindings map[string]indexed[B]) {
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
