package controller_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindkit/bindkit/controller"
)

// recordingObserver counts what an Impl reports and the queue metrics it
// asked for.
type recordingObserver struct {
	mu       sync.Mutex
	outcomes map[string][]controller.Outcome // by key's controller name
	took     []time.Duration
	queues   []string
	adds     int
}

func (o *recordingObserver) Reconciled(name string, outcome controller.Outcome, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outcomes == nil {
		o.outcomes = map[string][]controller.Outcome{}
	}
	o.outcomes[name] = append(o.outcomes[name], outcome)
	o.took = append(o.took, took)
}

func (o *recordingObserver) get(name string) []controller.Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]controller.Outcome(nil), o.outcomes[name]...)
}

type addsCounter struct{ o *recordingObserver }

func (c addsCounter) Inc() {
	c.o.mu.Lock()
	c.o.adds++
	c.o.mu.Unlock()
}

type nopMetric struct{}

func (nopMetric) Inc()            {}
func (nopMetric) Dec()            {}
func (nopMetric) Set(float64)     {}
func (nopMetric) Observe(float64) {}

func (o *recordingObserver) NewDepthMetric(name string) workqueue.GaugeMetric {
	o.mu.Lock()
	o.queues = append(o.queues, name)
	o.mu.Unlock()
	return nopMetric{}
}
func (o *recordingObserver) NewAddsMetric(string) workqueue.CounterMetric { return addsCounter{o} }
func (o *recordingObserver) NewLatencyMetric(string) workqueue.HistogramMetric {
	return nopMetric{}
}
func (o *recordingObserver) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return nopMetric{}
}
func (o *recordingObserver) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return nopMetric{}
}
func (o *recordingObserver) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return nopMetric{}
}
func (o *recordingObserver) NewRetriesMetric(string) workqueue.CounterMetric { return nopMetric{} }

// TestObserverFromRunContext runs an Impl in a context carrying an
// Observer and checks it is told each reconcile's outcome and that the
// Impl's queue reports through it.
func TestObserverFromRunContext(t *testing.T) {
	failOnce := errors.New("transient")
	var mu sync.Mutex
	failed := false
	r := controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		switch key {
		case "ok":
			return nil
		case "requeue":
			return controller.NewRequeueAfter(time.Hour)
		case "permanent":
			return controller.NewPermanentError(errors.New("bad spec"))
		case "flaky":
			mu.Lock()
			defer mu.Unlock()
			if !failed {
				failed = true
				return failOnce
			}
			return nil
		case "panic":
			panic("boom")
		}
		return nil
	})
	obs := &recordingObserver{}
	impl := mustNew(t, r, controller.ControllerOptions{WorkQueueName: "observed", MaxRetries: controller.NoRetries})
	for _, key := range []string{"ok", "requeue", "permanent", "flaky", "panic"} {
		impl.EnqueueKey(key)
	}
	ctx, cancel := context.WithCancel(controller.WithObserver(context.Background(), obs))
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, 1) }()
	eventually(t, "five reconciles", func() bool { return len(obs.get("observed")) == 5 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// One worker takes keys in the order they were added. With no retry
	// allowed (MaxRetries: NoRetries), the failures are dropped.
	want := []controller.Outcome{controller.OutcomeSuccess, controller.OutcomeRequeue, controller.OutcomePermanent, controller.OutcomeError, controller.OutcomeError}
	if diff := cmp.Diff(want, obs.get("observed")); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if diff := cmp.Diff([]string{"observed"}, obs.queues); diff != "" {
		t.Errorf("queues that asked for metrics (-want +got):\n%s", diff)
	}
	if obs.adds != 5 {
		t.Errorf("queue adds = %d, want 5", obs.adds)
	}
}

func TestDemotionIsAnOutcome(t *testing.T) {
	started := make(chan struct{})
	r := &leaderAwareReconciler{reconcile: func(ctx context.Context, key string) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	obs := &recordingObserver{}
	impl := controller.NewImpl(r, nil, "demoted")
	impl.Promote()
	impl.EnqueueKey("k")
	ctx, cancel := context.WithCancel(controller.WithObserver(context.Background(), obs))
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, 1) }()
	<-started
	impl.Demote()
	eventually(t, "the reconcile's end", func() bool { return len(obs.get("demoted")) == 1 })
	cancel()
	<-done
	if diff := cmp.Diff([]controller.Outcome{controller.OutcomeDemoted}, obs.get("demoted")); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

type leaderAwareReconciler struct {
	controller.LeaderAwareFuncs
	reconcile func(context.Context, string) error
}

func (r *leaderAwareReconciler) Reconcile(ctx context.Context, key string) error {
	return r.reconcile(ctx, key)
}

func TestFieldManagerFromContext(t *testing.T) {
	if got := controller.FieldManager(context.Background()); got != "" {
		t.Errorf("FieldManager of an empty context = %q, want none", got)
	}
	ctx := controller.WithFieldManager(context.Background(), "githubbinding-controller")
	if got := controller.FieldManager(ctx); got != "githubbinding-controller" {
		t.Errorf("FieldManager = %q", got)
	}
}

// An Observer set in ControllerOptions takes precedence over the context's,
// and reconciles find it in their context.
func TestObserverFieldTakesPrecedenceOverContext(t *testing.T) {
	field, fromContext := &recordingObserver{}, &recordingObserver{}
	seen := make(chan controller.Observer, 1)
	r := controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		seen <- controller.ObserverFrom(ctx)
		return nil
	})
	impl := mustNew(t, r, controller.ControllerOptions{WorkQueueName: "fielded", Observer: field})
	impl.EnqueueKey("k")
	ctx, cancel := context.WithCancel(controller.WithObserver(context.Background(), fromContext))
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, 1) }()
	got := <-seen
	eventually(t, "the reconcile's outcome", func() bool { return len(field.get("fielded")) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got != controller.Observer(field) {
		t.Errorf("ObserverFrom(reconcile's context) = %p, want the ControllerOptions.Observer %p", got, field)
	}
	if n := len(fromContext.get("fielded")); n != 0 {
		t.Errorf("the context's observer was told of %d reconciles, want none", n)
	}
}
