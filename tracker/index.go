package tracker

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// labelPair is one key=value label.
type labelPair struct{ key, value string }

// SelectorIndex files values under label selectors so that finding the
// selectors an object's labels may satisfy visits few of them, however
// many there are. It is the one label-pair index of the framework: the
// tracker keeps its observers' selectors in one, and psbinding's admission
// index its Bindings'.
//
// Each distinct selector (by its canonical string, labels.Selector.String)
// is an entry holding a value per key. An entry is filed under one label
// pair that every object it matches must carry: of the selector's
// requirements with exactly one value (key=value, key==value, key in
// (value)), the pair with the fewest entries filed under it so far, so
// that a pair many selectors share (team=payments) does not collect them
// all when each also has a rarer one (app=checkout). Selectors that
// require no single pair (NotIn, Exists, DoesNotExist, multi-valued In,
// the empty selector) are kept apart and visited on every lookup.
//
// The zero value is not usable; build one with NewSelectorIndex. A
// SelectorIndex is not safe for concurrent use: guard it, or build it once
// and only read it afterwards.
type SelectorIndex[K comparable, V any] struct {
	entries  map[string]*selectorEntry[K, V]
	byPair   map[labelPair]map[string]*selectorEntry[K, V]
	fallback map[string]*selectorEntry[K, V]
}

// selectorEntry is one distinct selector and its values.
type selectorEntry[K comparable, V any] struct {
	key      string // the selector's canonical string
	selector labels.Selector
	pair     labelPair // the pair the entry is filed under, when indexed
	indexed  bool
	values   map[K]V
}

// NewSelectorIndex returns an empty index.
func NewSelectorIndex[K comparable, V any]() *SelectorIndex[K, V] {
	return &SelectorIndex[K, V]{
		entries:  map[string]*selectorEntry[K, V]{},
		byPair:   map[labelPair]map[string]*selectorEntry[K, V]{},
		fallback: map[string]*selectorEntry[K, V]{},
	}
}

// Set files value under key for sel, replacing what key held for sel.
func (s *SelectorIndex[K, V]) Set(sel labels.Selector, key K, value V) {
	s.entry(sel).values[key] = value
}

// Get returns what key holds for the selector whose canonical string is
// selector.
func (s *SelectorIndex[K, V]) Get(selector string, key K) (V, bool) {
	var zero V
	e := s.entries[selector]
	if e == nil {
		return zero, false
	}
	v, ok := e.values[key]
	return v, ok
}

// Delete removes what key holds for the selector whose canonical string is
// selector, and the selector once it holds nothing.
func (s *SelectorIndex[K, V]) Delete(selector string, key K) {
	e := s.entries[selector]
	if e == nil {
		return
	}
	delete(e.values, key)
	if len(e.values) == 0 {
		s.remove(selector)
	}
}

// Len returns how many distinct selectors the index holds.
func (s *SelectorIndex[K, V]) Len() int { return len(s.entries) }

// Candidates calls visit for every selector an object with objLabels could
// match, with the values filed under it: those filed under one of the
// object's labels, and those that require no single pair. Each is visited
// once. visit must still evaluate the selector, and must not change values
// or the index.
func (s *SelectorIndex[K, V]) Candidates(objLabels map[string]string, visit func(sel labels.Selector, selector string, values map[K]V)) {
	if len(s.byPair) > 0 {
		for k, v := range objLabels {
			for _, e := range s.byPair[labelPair{key: k, value: v}] {
				visit(e.selector, e.key, e.values)
			}
		}
	}
	for _, e := range s.fallback {
		visit(e.selector, e.key, e.values)
	}
}

// entry returns sel's entry, creating and filing it when absent.
func (s *SelectorIndex[K, V]) entry(sel labels.Selector) *selectorEntry[K, V] {
	key := sel.String()
	if e, ok := s.entries[key]; ok {
		return e
	}
	e := &selectorEntry[K, V]{key: key, selector: sel, values: map[K]V{}}
	e.pair, e.indexed = s.choosePair(sel)
	s.entries[key] = e
	if e.indexed {
		bucket := s.byPair[e.pair]
		if bucket == nil {
			bucket = map[string]*selectorEntry[K, V]{}
			s.byPair[e.pair] = bucket
		}
		bucket[key] = e
	} else {
		s.fallback[key] = e
	}
	return e
}

// choosePair picks the single-valued required pair with the fewest entries
// already filed under it; ties go to the first requirement, in the
// selector's own (sorted) order, so the choice is deterministic.
func (s *SelectorIndex[K, V]) choosePair(sel labels.Selector) (labelPair, bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return labelPair{}, false
	}
	var best labelPair
	bestSize, found := 0, false
	for i := range reqs {
		r := &reqs[i]
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		values := r.ValuesUnsorted()
		if len(values) != 1 {
			continue
		}
		p := labelPair{key: r.Key(), value: values[0]}
		if size := len(s.byPair[p]); !found || size < bestSize {
			best, bestSize, found = p, size, true
		}
	}
	return best, found
}

// remove drops the entry with canonical string key from every map.
func (s *SelectorIndex[K, V]) remove(key string) {
	e, ok := s.entries[key]
	if !ok {
		return
	}
	delete(s.entries, key)
	if !e.indexed {
		delete(s.fallback, key)
		return
	}
	bucket := s.byPair[e.pair]
	delete(bucket, key)
	if len(bucket) == 0 {
		delete(s.byPair, e.pair)
	}
}
