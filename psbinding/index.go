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
	// members identify the Bindings filed here, in order.
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

// indexing is what the index needs to know of a Binding.
type indexing[B any] struct {
	// identity gives its namespace and name (the order Do and Undo run
	// in) and its resourceVersion ("" when it has none: never taken as
	// unchanged). It is called for every Binding at every build.
	identity func(B) (namespace, name, version string)
	// subject gives its subject reference, the namespace filled in. It is
	// called only for Bindings the previous build did not parse at the
	// same version.
	subject func(B) tracker.Reference
	// validate, if set, says whether a Binding is valid; an invalid one is
	// left out. It is called when subject is.
	validate func(B) error
}

// newIndex indexes bindings by subject. A Binding whose reference does not
// validate, or leaves the Binding's namespace, is left out and reported in
// the returned errors, so one bad Binding does not stop the others from
// applying.
func newIndex[B any](bindings []B, of indexing[B]) (*index[B], []error) {
	return (*index[B])(nil).rebuild(bindings, of)
}

// rebuild is newIndex reusing prev (which may be nil): a Binding whose
// resourceVersion is the one prev parsed is not parsed again, and a scope
// whose Bindings are all unchanged since prev keeps prev's sub-index,
// Bindings and all (the same versions are the same objects). Only the
// scopes that changed are built again; the rest of a build is a walk of
// the list. prev is not changed.
func (prev *index[B]) rebuild(bindings []B, of indexing[B]) (*index[B], []error) {
	ix := &index[B]{
		scopes: make(map[scopeKey]*scopeIndex[B], prev.scopeCount()),
		parsed: make(map[bindingKey]parsedSubject, len(bindings)),
		filed:  make([]B, 0, len(bindings)),
	}
	var errs []error
	// unchanged counts, per scope, the Bindings filed there by prev at the
	// same version; dirty marks the scopes of the others.
	unchanged := make(map[scopeKey]int, prev.scopeCount())
	dirty := map[scopeKey]bool{}
	members := make([]member, 0, len(bindings)) // of ix.filed, in its order
	for _, b := range bindings {
		ns, name, version := of.identity(b)
		key := bindingKey{namespace: ns, name: name}
		p, same := prev.parsedAs(key, version)
		if !same {
			p = parseSubject(of.subject(b), ns, name, version)
			if p.err == nil && of.validate != nil {
				if err := of.validate(b); err != nil {
					p.err = fmt.Errorf("binding %s/%s: %w", ns, name, err)
				}
			}
		}
		ix.parsed[key] = p
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		ix.filed = append(ix.filed, b)
		members = append(members, member{bindingKey: key, version: version})
		if same {
			unchanged[p.scope]++
		} else {
			dirty[p.scope] = true
		}
	}
	for scope, n := range unchanged {
		if old := prev.scopes[scope]; !dirty[scope] && old != nil && n == len(old.members) {
			// Exactly prev's Bindings, at prev's versions.
			ix.scopes[scope] = old
		}
	}
	// The other scopes are built from their Bindings.
	changed := map[scopeKey][]filing[B]{}
	for i, m := range members {
		scope := ix.parsed[m.bindingKey].scope
		if _, reused := ix.scopes[scope]; !reused {
			changed[scope] = append(changed[scope], filing[B]{member: m, binding: ix.filed[i]})
		}
	}
	for scope, group := range changed {
		ix.scopes[scope] = newScopeIndex(group, ix.parsed)
	}
	return ix, errs
}

// filing is one Binding to file in its scope.
type filing[B any] struct {
	member
	binding B
}

// newScopeIndex files one scope's Bindings.
func newScopeIndex[B any](group []filing[B], parsed map[bindingKey]parsedSubject) *scopeIndex[B] {
	slices.SortFunc(group, func(a, b filing[B]) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	sc := &scopeIndex[B]{members: make([]member, len(group))}
	for i, f := range group {
		sc.members[i] = f.member
		sc.add(indexed[B]{binding: f.binding, order: f.namespace + "/" + f.name}, parsed[f.bindingKey])
	}
	return sc
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
