package tracker

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Interface records which observers track which objects and tells the
// callback given to New when a tracked object changes. All methods are safe
// for concurrent use.
//
// The obj parameters accept a metav1.Object (a typed object, an
// *unstructured.Unstructured, a *metav1.PartialObjectMetadata, ...) or a
// tombstone holding one: a struct, or pointer to a struct, with an exported
// interface field Obj, such as client-go's cache.DeletedFinalStateUnknown.
// The methods without Kind in their name read the kind from the object
// itself (its apiVersion and kind, i.e. TypeMeta); the Kind variants take it
// from the caller, which is what typed objects from informers need because
// their TypeMeta is usually empty. When the kind cannot be determined, or
// the explicit kind contradicts the object's own, the methods return an
// error (wrapping ErrNoKind for the first case) instead of silently matching
// nothing.
type Interface interface {
	// TrackReference registers that observer depends on the objects ref
	// names, or renews the registration, for the tracker's lease duration
	// from now. It returns an error naming the observer and the reference
	// when either is invalid (see Reference.Validate, Observer.Validate).
	TrackReference(ref Reference, observer Observer) error

	// UntrackReference removes observer's registration of ref at once,
	// without waiting for its lease to run out. Removing a registration
	// that does not exist is not an error; an invalid ref or observer is.
	UntrackReference(ref Reference, observer Observer) error

	// OnChanged calls the callback given to New, once per observer, for
	// every observer with an unexpired registration that matches obj: by
	// group, kind, namespace and name, or by group, kind, namespace and a
	// selector that matches obj's labels. obj must carry its kind.
	// Observers are reported in the order of GetObservers, on the calling
	// goroutine, with no tracker lock held.
	OnChanged(obj any) error

	// OnChangedKind is OnChanged for an object whose kind is gk. The
	// object's own kind, when it has one, must agree with gk.
	OnChangedKind(gk schema.GroupKind, obj any) error

	// GetObservers returns the observers OnChanged(obj) would notify,
	// without duplicates, sorted by group, kind, namespace and name, or nil
	// when there are none.
	GetObservers(obj any) ([]Observer, error)

	// GetObserversKind is GetObservers for an object whose kind is gk.
	GetObserversKind(gk schema.GroupKind, obj any) ([]Observer, error)

	// OnDeletedObserver forgets every registration of observer, for
	// example when the Binding it stands for is deleted. Use ObserverFor
	// to build the Observer from a deleted object or tombstone.
	OnDeletedObserver(observer Observer)

	// Sweep removes every expired registration and returns how many it
	// removed. Lookups already ignore expired registrations and remove
	// those they meet; Sweep reclaims the rest, such as registrations of
	// objects that never change. Call it as often as memory matters, for
	// example once per lease.
	Sweep() int
}

// Options configures a tracker built by NewWithOptions. Zero fields take
// the documented defaults.
type Options struct {
	// Callback is called from OnChanged and OnChangedKind with each
	// observer of the changed object. It runs without the tracker's lock,
	// so it may call back into the tracker (for example to enqueue and
	// re-track). Default: nil, which makes those calls only validate obj.
	Callback func(Observer)
	// Lease is how long each registration is kept after its last
	// TrackReference. Required: it must be positive, since a zero lease
	// would drop every registration at once.
	Lease time.Duration
	// Clock returns the current time; tests set it to expire leases
	// without sleeping. Default: time.Now.
	Clock func() time.Time
}

// NewWithOptions returns an empty tracker configured by opts, or an error
// naming the field opts sets wrongly.
func NewWithOptions(opts Options) (Interface, error) {
	if opts.Lease <= 0 {
		return nil, fmt.Errorf("tracker: Lease must be positive, got %v", opts.Lease)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &tracker{
		callback:   opts.Callback,
		lease:      opts.Lease,
		now:        opts.Clock,
		exact:      map[exactKey]map[Observer]time.Time{},
		selectors:  map[scopeKey]*SelectorIndex[Observer, time.Time]{},
		byObserver: map[Observer]map[registration]struct{}{},
	}, nil
}

// New returns an empty tracker that keeps each registration for lease after
// its last TrackReference and calls callback from OnChanged and
// OnChangedKind: NewWithOptions with Callback and Lease set. It keeps
// knative's tracker.New(callback, lease) signature, which returns no error,
// so New panics if lease is not positive (see MIGRATING.md); use
// NewWithOptions to get the error instead.
func New(callback func(Observer), lease time.Duration) Interface {
	t, err := NewWithOptions(Options{Callback: callback, Lease: lease})
	if err != nil {
		panic("tracker.New: " + err.Error())
	}
	return t
}

// scopeKey is a kind in a namespace: all the objects a selector may match.
type scopeKey struct {
	gk        schema.GroupKind
	namespace string
}

// exactKey is one object.
type exactKey struct {
	scopeKey
	name string
}

// registration is one thing an observer tracks, as kept in the reverse
// index used by OnDeletedObserver: an exact name, or a selector by its
// canonical string.
type registration struct {
	scope      scopeKey
	target     string
	bySelector bool
}

// expired is a registration a lookup found expired, to remove afterwards.
type expired struct {
	reg      registration
	observer Observer
}

type tracker struct {
	callback func(Observer)
	lease    time.Duration
	now      func() time.Time

	// mu guards the maps below. Lookups take it for reading, so informers
	// of different kinds can look up in parallel.
	mu         sync.RWMutex
	exact      map[exactKey]map[Observer]time.Time // observer -> lease expiry
	selectors  map[scopeKey]*SelectorIndex[Observer, time.Time]
	byObserver map[Observer]map[registration]struct{}
}

// prepare validates ref and observer and resolves ref to a registration and,
// for a selector reference, its parsed selector.
func prepare(ref Reference, observer Observer) (registration, labels.Selector, error) {
	if err := observer.Validate(); err != nil {
		return registration{}, nil, fmt.Errorf("tracker: observer %s: %w", observer, err)
	}
	if err := ref.Validate(); err != nil {
		return registration{}, nil, fmt.Errorf("tracker: observer %s: reference %s: %w", observer, ref, err)
	}
	gvk, err := ref.GroupVersionKind()
	if err != nil { // unreachable after Validate; kept so a change there cannot panic here
		return registration{}, nil, fmt.Errorf("tracker: observer %s: reference %s: %w", observer, ref, err)
	}
	scope := scopeKey{gk: gvk.GroupKind(), namespace: ref.Namespace}
	if ref.Selector == nil {
		return registration{scope: scope, target: ref.Name}, nil, nil
	}
	sel, err := ref.LabelSelector()
	if err != nil {
		return registration{}, nil, fmt.Errorf("tracker: observer %s: reference %s: %w", observer, ref, err)
	}
	return registration{scope: scope, target: sel.String(), bySelector: true}, sel, nil
}

func (t *tracker) TrackReference(ref Reference, observer Observer) error {
	reg, sel, err := prepare(ref, observer)
	if err != nil {
		return err
	}
	expiry := t.now().Add(t.lease)

	t.mu.Lock()
	defer t.mu.Unlock()
	if reg.bySelector {
		set := t.selectors[reg.scope]
		if set == nil {
			set = NewSelectorIndex[Observer, time.Time]()
			t.selectors[reg.scope] = set
		}
		set.Set(sel, observer, expiry)
	} else {
		key := exactKey{scopeKey: reg.scope, name: reg.target}
		observers := t.exact[key]
		if observers == nil {
			observers = map[Observer]time.Time{}
			t.exact[key] = observers
		}
		observers[observer] = expiry
	}
	regs := t.byObserver[observer]
	if regs == nil {
		regs = map[registration]struct{}{}
		t.byObserver[observer] = regs
	}
	regs[reg] = struct{}{}
	return nil
}

func (t *tracker) UntrackReference(ref Reference, observer Observer) error {
	reg, _, err := prepare(ref, observer)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(reg, observer)
	return nil
}

func (t *tracker) OnDeletedObserver(observer Observer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for reg := range t.byObserver[observer] {
		t.removeLocked(reg, observer)
	}
}

func (t *tracker) OnChanged(obj any) error {
	return t.OnChangedKind(schema.GroupKind{}, obj)
}

func (t *tracker) OnChangedKind(gk schema.GroupKind, obj any) error {
	observers, err := t.GetObserversKind(gk, obj)
	if err != nil {
		return err
	}
	if t.callback == nil {
		return nil
	}
	for _, o := range observers {
		t.callback(o)
	}
	return nil
}

func (t *tracker) GetObservers(obj any) ([]Observer, error) {
	return t.GetObserversKind(schema.GroupKind{}, obj)
}

func (t *tracker) GetObserversKind(gk schema.GroupKind, obj any) ([]Observer, error) {
	o, err := identify(gk, obj)
	if err != nil {
		return nil, err
	}
	return t.lookup(o), nil
}

// lookup collects the observers of o under the read lock, then removes the
// expired registrations it met under the write lock.
func (t *tracker) lookup(o object) []Observer {
	now := t.now()
	scope := scopeKey{gk: o.gk, namespace: o.namespace}
	var found []Observer
	var stale []expired

	t.mu.RLock()
	for observer, expiry := range t.exact[exactKey{scopeKey: scope, name: o.name}] {
		if now.Before(expiry) {
			found = append(found, observer)
		} else {
			stale = append(stale, expired{registration{scope: scope, target: o.name}, observer})
		}
	}
	if set := t.selectors[scope]; set != nil {
		objLabels := labels.Set(o.labels)
		set.Candidates(o.labels, func(sel labels.Selector, key string, observers map[Observer]time.Time) {
			matches := sel.Matches(objLabels)
			for observer, expiry := range observers {
				switch {
				case !now.Before(expiry):
					stale = append(stale, expired{registration{scope: scope, target: key, bySelector: true}, observer})
				case matches:
					found = append(found, observer)
				}
			}
		})
	}
	t.mu.RUnlock()

	if len(stale) > 0 {
		t.forget(stale, now)
	}
	if len(found) > 1 {
		slices.SortFunc(found, compareObservers)
		found = slices.Compact(found)
	}
	return found
}

// forget removes the given registrations if they are still expired at now;
// one renewed since the lookup saw it is kept.
func (t *tracker) forget(stale []expired, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range stale {
		if expiry, ok := t.expiryLocked(s.reg, s.observer); ok && !now.Before(expiry) {
			t.removeLocked(s.reg, s.observer)
		}
	}
}

func (t *tracker) Sweep() int {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	removed := 0
	for observer, regs := range t.byObserver {
		for reg := range regs {
			if expiry, ok := t.expiryLocked(reg, observer); ok && !now.Before(expiry) {
				t.removeLocked(reg, observer)
				removed++
			}
		}
	}
	return removed
}

// expiryLocked returns when observer's registration reg expires.
func (t *tracker) expiryLocked(reg registration, observer Observer) (time.Time, bool) {
	if !reg.bySelector {
		expiry, ok := t.exact[exactKey{scopeKey: reg.scope, name: reg.target}][observer]
		return expiry, ok
	}
	set := t.selectors[reg.scope]
	if set == nil {
		return time.Time{}, false
	}
	return set.Get(reg.target, observer)
}

// removeLocked drops observer's registration reg and every container it
// leaves empty, so memory follows the live registrations.
func (t *tracker) removeLocked(reg registration, observer Observer) {
	if reg.bySelector {
		if set := t.selectors[reg.scope]; set != nil {
			set.Delete(reg.target, observer)
			if set.Len() == 0 {
				delete(t.selectors, reg.scope)
			}
		}
	} else {
		key := exactKey{scopeKey: reg.scope, name: reg.target}
		if observers := t.exact[key]; observers != nil {
			delete(observers, observer)
			if len(observers) == 0 {
				delete(t.exact, key)
			}
		}
	}
	if regs := t.byObserver[observer]; regs != nil {
		delete(regs, reg)
		if len(regs) == 0 {
			delete(t.byObserver, observer)
		}
	}
}
