// Package controller is the work-queue loop bindkit's reconcilers run on.
// It owns retries and backoff, leader-only writes and events, so that a
// reconciler is one method that brings one key to its desired state.
//
// A controller author writes a Reconciler, one method that gets a
// "namespace/name" key, and hands it to NewImpl. Informer event handlers,
// built from HandleAll and the Filter functions and composed with
// cache.FilteringResourceEventHandler, feed keys to the Impl's Enqueue
// methods; Run reconciles them on N workers until its context ends, then
// drains in-flight work and returns.
//
//	impl := controller.NewImpl(reconciler, logger, "bindings")
//	informer.AddEventHandler(controller.HandleAll(impl.Enqueue))
//	go impl.Run(ctx, 2)
//
// # Errors
//
// Reconcile's error decides what happens to the key: nil forgets it,
// NewRequeueAfter(d) reconciles it again after d without counting a failure,
// NewPermanentError(err) logs it and waits for a change to the object (an
// informer event or resync enqueues it again), and any other error retries
// it, without end, with per-key exponential backoff from DefaultBaseBackoff
// up to DefaultMaxBackoff (ControllerOptions.MaxBackoff). A transient failure therefore
// never strands an object: once its cause is fixed, the key recovers within
// one backoff step. ControllerOptions.MaxRetries restores a retry budget for a controller
// that wants one.
//
// # Logging
//
// Impl logs with zap. Every line it writes about a reconcile carries the
// fields controller, key and reconcileID (8 hex digits, new for each
// attempt), and the context passed to Reconcile carries a logger with the
// same fields: take it with logging.FromContext from the
// controller/logging sub-package, which code that must not import this
// package can use too.
//
// # Leader election
//
// Every replica runs every Impl's workers, so state a reconciler only reads
// (an admission index, a cache) stays warm on followers too. Writes are the
// leader's: RunLeaderElected campaigns for a coordination.k8s.io/v1 Lease
// and promotes the given Impls when this replica wins it, demotes them when
// it is lost, and campaigns again. A reconciler that writes only while
// leader implements LeaderAware, usually by embedding LeaderAwareFuncs, and
// checks IsLeader before writing. The Impl does the rest: demotion cancels
// the context of every reconcile in flight, so a demoted replica's writes
// stop, and the keys a follower reconciled (skipping their writes) are
// enqueued again on promotion, so nothing that existed before this replica
// led is left unreconciled. A single replica without election calls
// Impl.Promote itself.
//
// # Events
//
// NewEventRecorder builds a client-go record.EventRecorder for a component
// that writes Events through a kube client and stops with its context.
package controller
