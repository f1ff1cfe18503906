package controller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Outcome is how one reconcile ended, as an Observer is told it. Its
// value is the label metrics give it.
type Outcome string

// The outcomes of a reconcile.
const (
	// OutcomeSuccess: Reconcile returned nil; the key is forgotten.
	OutcomeSuccess Outcome = "success"
	// OutcomeRequeue: Reconcile asked to run again later
	// (NewRequeueAfter), which is not a failure.
	OutcomeRequeue Outcome = "requeue"
	// OutcomeError: Reconcile failed (or panicked); the key is retried
	// with backoff, or dropped after ControllerOptions.MaxRetries.
	OutcomeError Outcome = "error"
	// OutcomePermanent: Reconcile failed with NewPermanentError; the key
	// waits for a change.
	OutcomePermanent Outcome = "permanent"
	// OutcomeDemoted: the replica lost its leadership while the reconcile
	// ran, which cut it short; the next leader reconciles the key again.
	OutcomeDemoted Outcome = "demoted"
)

// Outcomes lists every Outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeSuccess, OutcomeRequeue, OutcomeError, OutcomePermanent, OutcomeDemoted}
}

// Observer is told what an Impl does, for metrics (package metrics
// implements it for Prometheus). Run takes it from its context
// (WithObserver), so a process sets it once for Impls whatever built them.
//
// Its workqueue.MetricsProvider methods are called once, when Run builds
// the Impl's queue, with the Impl's name; the queue then reports its
// depth, adds, latency, work duration and retries through what they
// return, as client-go's queues do. Reconciled is called after every
// reconcile, from the Impl's workers, concurrently; it must be quick.
type Observer interface {
	workqueue.MetricsProvider
	Reconciled(controller string, outcome Outcome, took time.Duration)
}

type (
	observerKey     struct{}
	fieldManagerKey struct{}
)

// WithObserver returns a copy of ctx that makes every Impl Run in it
// report to o. injection/sharedmain runs its Impls in such a context.
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, o)
}

// ObserverFrom returns the Observer WithObserver stored in ctx, or nil.
// The contexts Run passes to Reconcile derive from Run's, so a reconciler
// finds it there too, and may look for more in it: psbinding's
// BaseReconciler reports to it when it also implements psbinding.Observer.
func ObserverFrom(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}

// WithFieldManager returns a copy of ctx naming the field manager that
// reconcilers run in it set on their writes (the managedFields' manager
// of what they change), so an operator sees which controller wrote what.
// injection/sharedmain runs its Impls with the process's component name
// here; the contexts Run passes to Reconcile derive from Run's, so they
// carry it.
func WithFieldManager(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, fieldManagerKey{}, name)
}

// FieldManager returns the field manager WithFieldManager stored in ctx,
// or "" when there is none: reconcilers then use their own default.
func FieldManager(ctx context.Context) string {
	name, _ := ctx.Value(fieldManagerKey{}).(string)
	return name
}
