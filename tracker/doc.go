// Package tracker records which observers depend on which objects, so that a
// change to an object can re-enqueue every observer that cares about it.
//
// An observer (for bindkit, a Binding) tracks a Reference: one object by
// name, or every object of a kind in a namespace whose labels match a
// selector. An informer on the referenced kind reports each change with
// OnChanged or OnChangedKind; the tracker calls its callback once for every
// observer whose registration matches the changed object.
//
// Observers are identified by GroupKind as well as namespace and name, so one
// tracker serves several observer kinds, and two observers that share a name
// but not a kind never see each other's registrations.
//
// Matching ignores API versions: a reference to apps/v1beta1 Deployment
// matches a Deployment reported by an apps/v1 informer, because both are the
// same stored object.
//
// Registrations are leases. Each TrackReference call keeps the registration
// for the lease duration given to New; an observer that stops renewing (a
// Binding that is no longer reconciled, or that changed its subject) stops
// being notified once the lease runs out. Expired registrations are never
// reported and their memory is reclaimed lazily by lookups that meet them and
// by Sweep, which the caller may run periodically; New starts no goroutines.
//
// Selector registrations are indexed by one required key=value pair of their
// selector (from matchLabels, or a matchExpressions In with one value), so a
// lookup only evaluates selectors whose indexed pair the object carries, plus
// the selectors that have no such pair (only NotIn, Exists, DoesNotExist or
// multi-valued In). See BENCHMARKS.md for the numbers.
//
// A tracker is safe for concurrent use. Its callback runs on the goroutine
// that called OnChanged, after the tracker's lock is released, so the
// callback may call back into the tracker.
package tracker
