package tracker

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// labelPair is one key=value label.
type labelPair struct{ key, value string }

// selectorEntry is one distinct selector of a kind in a namespace, with the
// observers that track it and when each registration expires.
type selectorEntry struct {
	key       string // the selector's canonical string
	selector  labels.Selector
	pair      labelPair // the pair the entry is indexed under, when indexed
	indexed   bool
	observers map[Observer]time.Time
}

// selectorSet holds the selector registrations of one kind in one
// namespace. Every entry sits in exactly one of byPair and fallback, so a
// lookup visits it at most once.
//
// An entry is indexed under one label pair that every object it matches
// must carry; an object can then only match entries indexed under one of its
// own labels. Entries whose selectors require no single pair (NotIn, Exists,
// DoesNotExist, multi-valued In, or the empty selector) go to fallback and
// are checked on every lookup.
type selectorSet struct {
	entries  map[string]*selectorEntry
	byPair   map[labelPair]map[string]*selectorEntry
	fallback map[string]*selectorEntry
}

func newSelectorSet() *selectorSet {
	return &selectorSet{
		entries:  map[string]*selectorEntry{},
		byPair:   map[labelPair]map[string]*selectorEntry{},
		fallback: map[string]*selectorEntry{},
	}
}

// entry returns the entry for the selector with canonical string key,
// creating and indexing it with sel when absent.
func (s *selectorSet) entry(key string, sel labels.Selector) *selectorEntry {
	if e, ok := s.entries[key]; ok {
		return e
	}
	e := &selectorEntry{key: key, selector: sel, observers: map[Observer]time.Time{}}
	e.pair, e.indexed = s.choosePair(sel)
	s.entries[key] = e
	if e.indexed {
		bucket := s.byPair[e.pair]
		if bucket == nil {
			bucket = map[string]*selectorEntry{}
			s.byPair[e.pair] = bucket
		}
		bucket[key] = e
	} else {
		s.fallback[key] = e
	}
	return e
}

// choosePair picks the required pair with the fewest entries already indexed
// under it, so that a pair many selectors share (say team=payments) does not
// collect them all when each also has a more specific one (app=checkout).
func (s *selectorSet) choosePair(sel labels.Selector) (labelPair, bool) {
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
func (s *selectorSet) remove(key string) {
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

// candidates calls visit for every entry that could match an object with
// the given labels: those indexed under one of its labels and the fallback.
// visit must still evaluate the selector.
func (s *selectorSet) candidates(objLabels map[string]string, visit func(*selectorEntry)) {
	if len(s.byPair) > 0 {
		for k, v := range objLabels {
			for _, e := range s.byPair[labelPair{key: k, value: v}] {
				visit(e)
			}
		}
	}
	for _, e := range s.fallback {
		visit(e)
	}
}
