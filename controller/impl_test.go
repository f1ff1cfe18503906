package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
)

// TestReconcileResults drives one key through scripted Reconcile results and
// checks how often it ran, how the rate limiter was used and what the Impl
// logged.
func TestReconcileResults(t *testing.T) {
	boom := errors.New("boom")
	type logLine struct {
		Level   zapcore.Level
		Message string
	}
	tests := []struct {
		name       string
		maxRetries int
		results    []error // result of the n-th call; nil after the end
		last       string  // message that ends the key's processing
		wantCalls  int
		wantWhen   int // retries through the rate limiter
		wantLog    []logLine
	}{{
		name:      "success is forgotten",
		last:      "reconcile succeeded",
		wantCalls: 1,
		wantLog:   []logLine{{zapcore.DebugLevel, "reconcile succeeded"}},
	}, {
		name:      "permanent error is logged and not retried",
		results:   []error{controller.NewPermanentError(fmt.Errorf("spec: %w", boom))},
		last:      "reconcile failed permanently; waiting for a change",
		wantCalls: 1,
		wantLog:   []logLine{{zapcore.ErrorLevel, "reconcile failed permanently; waiting for a change"}},
	}, {
		name:      "wrapped permanent error is not retried",
		results:   []error{fmt.Errorf("binding default/x: %w", controller.NewPermanentError(boom))},
		last:      "reconcile failed permanently; waiting for a change",
		wantCalls: 1,
		wantLog:   []logLine{{zapcore.ErrorLevel, "reconcile failed permanently; waiting for a change"}},
	}, {
		name:      "requeue after is not a failure",
		results:   []error{controller.NewRequeueAfter(10 * time.Millisecond)},
		last:      "reconcile succeeded",
		wantCalls: 2,
		wantLog: []logLine{
			{zapcore.DebugLevel, "reconcile requeued"},
			{zapcore.DebugLevel, "reconcile succeeded"},
		},
	}, {
		name:       "transient errors are retried until success",
		maxRetries: 5,
		results:    []error{boom, boom},
		last:       "reconcile succeeded",
		wantCalls:  3,
		wantWhen:   2,
		wantLog: []logLine{
			{zapcore.WarnLevel, "reconcile failed; will retry"},
			{zapcore.WarnLevel, "reconcile failed; will retry"},
			{zapcore.DebugLevel, "reconcile succeeded"},
		},
	}, {
		name:       "an expected wait and a conflict are retried at info level, saying waiting",
		maxRetries: 5,
		results: []error{
			controller.NewWaiting(errors.New(`secret webhook-certs has no "ca-cert.pem" yet`)),
			fmt.Errorf("update: %w", apierrors.NewConflict(schema.GroupResource{Resource: "mutatingwebhookconfigurations"}, "x", boom)),
		},
		last:      "reconcile succeeded",
		wantCalls: 3,
		wantWhen:  2,
		wantLog: []logLine{
			{zapcore.InfoLevel, "reconcile waiting; will retry"},
			{zapcore.InfoLevel, "reconcile waiting; will retry"},
			{zapcore.DebugLevel, "reconcile succeeded"},
		},
	}, {
		name:       "by default a transient error is retried without end",
		maxRetries: -1,
		results:    slices.Repeat([]error{boom}, 40),
		last:       "reconcile succeeded",
		wantCalls:  41,
		wantWhen:   40,
		wantLog: append(slices.Repeat([]logLine{{zapcore.WarnLevel, "reconcile failed; will retry"}}, 40),
			logLine{zapcore.DebugLevel, "reconcile succeeded"}),
	}, {
		name:       "MaxRetries caps retries, then the key is dropped",
		maxRetries: 2,
		results:    []error{boom, boom, boom, boom, boom},
		last:       "reconcile failed; dropping key after retries",
		wantCalls:  3,
		wantWhen:   2,
		wantLog: []logLine{
			{zapcore.WarnLevel, "reconcile failed; will retry"},
			{zapcore.WarnLevel, "reconcile failed; will retry"},
			{zapcore.ErrorLevel, "reconcile failed; dropping key after retries"},
		},
	}, {
		name:       "zero retries drops at the first failure",
		maxRetries: 0,
		results:    []error{boom},
		last:       "reconcile failed; dropping key after retries",
		wantCalls:  1,
		wantLog:    []logLine{{zapcore.ErrorLevel, "reconcile failed; dropping key after retries"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c calls
			r := controller.ReconcilerFunc(func(_ context.Context, key string) error {
				n := c.count(key)
				c.add(key)
				if n < len(tt.results) {
					return tt.results[n]
				}
				return nil
			})
			limiter := newCountingLimiter()
			logger, logs := observed()
			// tt.maxRetries counts retries, negative for no cap; in
			// ControllerOptions, 0 is no cap and NoRetries is none.
			maxRetries := tt.maxRetries
			switch {
			case maxRetries < 0:
				maxRetries = 0
			case maxRetries == 0:
				maxRetries = controller.NoRetries
			}
			impl := mustNew(t, r, controller.ControllerOptions{Logger: logger, WorkQueueName: "results", RateLimiter: limiter, MaxRetries: maxRetries})
			impl.EnqueueKey("default/x")
			stop := run(t, impl, 1)
			eventually(t, tt.last, hasMessage(logs, tt.last))
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}

			if got := c.count("default/x"); got != tt.wantCalls {
				t.Errorf("Reconcile calls = %d, want %d", got, tt.wantCalls)
			}
			if when, _ := limiter.counts(); when != tt.wantWhen {
				t.Errorf("rate-limited retries = %d, want %d", when, tt.wantWhen)
			}
			var got []logLine
			for _, e := range logs.FilterField(zap.String("key", "default/x")).All() {
				got = append(got, logLine{e.Level, e.Message})
			}
			if diff := cmp.Diff(tt.wantLog, got); diff != "" {
				t.Errorf("log lines for the key (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogLinesCarryReconcileID checks that each attempt has its own
// reconcile ID, that the Impl's lines carry controller, key and ID, and
// that the logger in Reconcile's context carries the same fields.
func TestLogLinesCarryReconcileID(t *testing.T) {
	logger, logs := observed()
	var attempts int
	r := controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		logging.FromContext(ctx).Info("inside reconcile")
		attempts++ // one worker: no race
		if attempts < 3 {
			return errors.New("again")
		}
		return nil
	})
	impl := mustNew(t, r, controller.ControllerOptions{Logger: logger, WorkQueueName: "ids", RateLimiter: newCountingLimiter()})
	impl.EnqueueKey("ns/obj")
	stop := run(t, impl, 1)
	eventually(t, "success", hasMessage(logs, "reconcile succeeded"))
	stop()

	// Group the lines about the key by reconcile ID, in order of appearance.
	type attempt struct {
		ID       string
		Messages []string
	}
	var got []attempt
	for _, e := range logs.FilterField(zap.String("key", "ns/obj")).All() {
		fields := e.ContextMap()
		if fields["controller"] != "ids" {
			t.Errorf("line %q: controller = %v, want ids", e.Message, fields["controller"])
		}
		id, _ := fields["reconcileID"].(string)
		if len(id) != 8 {
			t.Errorf("line %q: reconcileID = %q, want 8 hex digits", e.Message, id)
		}
		if len(got) == 0 || got[len(got)-1].ID != id {
			got = append(got, attempt{ID: id})
		}
		got[len(got)-1].Messages = append(got[len(got)-1].Messages, e.Message)
	}
	want := []attempt{
		{Messages: []string{"inside reconcile", "reconcile failed; will retry"}},
		{Messages: []string{"inside reconcile", "reconcile failed; will retry"}},
		{Messages: []string{"inside reconcile", "reconcile succeeded"}},
	}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".ID"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("lines per attempt (-want +got):\n%s", diff)
	}
	ids := map[string]bool{}
	for _, a := range got {
		ids[a.ID] = true
	}
	if len(ids) != len(got) {
		t.Errorf("reconcile IDs are not unique per attempt: %v", got)
	}
}

// TestRunDrainsInFlightWork cancels Run while a reconcile is in flight and
// more keys wait: the in-flight reconcile finishes with a live context
// before Run returns, and the waiting keys are not started.
func TestRunDrainsInFlightWork(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	var (
		mu       sync.Mutex
		finished []string
		ctxErr   error
	)
	r := controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		if key == "ns/slow" {
			close(started)
			<-release
			time.Sleep(20 * time.Millisecond) // give a Run that does not wait a chance to return
			mu.Lock()
			ctxErr = ctx.Err()
			mu.Unlock()
		}
		mu.Lock()
		finished = append(finished, key)
		mu.Unlock()
		return nil
	})
	impl := controller.NewImpl(r, nil, "drain")
	impl.EnqueueKey("ns/slow")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, 1) }()
	<-started
	impl.EnqueueKey("ns/queued-1")
	impl.EnqueueKey("ns/queued-2")
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"ns/slow"}, finished); diff != "" {
		t.Errorf("reconciles finished before Run returned (-want +got):\n%s", diff)
	}
	if ctxErr != nil {
		t.Errorf("in-flight reconcile's context ended during the drain: %v", ctxErr)
	}

	// After Run, enqueues are dropped and never reconciled.
	impl.EnqueueKey("ns/late")
	if err := impl.Run(context.Background(), 1); err == nil {
		t.Error("second Run succeeded, want an error")
	}
}

// TestRunCancelsReconcilesThatOutliveTheDrainTimeout checks that a
// reconcile blocked on its context is cancelled after the drain timeout and
// that Run reports it.
func TestRunCancelsReconcilesThatOutliveTheDrainTimeout(t *testing.T) {
	started := make(chan struct{})
	var gotErr error
	r := controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		close(started)
		<-ctx.Done()
		gotErr = ctx.Err()
		return ctx.Err()
	})
	impl := mustNew(t, r, controller.ControllerOptions{WorkQueueName: "stuck", DrainTimeout: 10 * time.Millisecond})
	impl.EnqueueKey("ns/stuck")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, 2) }()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Error("Run returned nil, want an error naming the drain timeout")
	}
	if !errors.Is(gotErr, context.Canceled) {
		t.Errorf("reconcile context error = %v, want context.Canceled", gotErr)
	}
}

func TestRunRejectsBadWorkerCounts(t *testing.T) {
	for _, workers := range []int{0, -1} {
		impl := controller.NewImpl(controller.ReconcilerFunc(func(context.Context, string) error { return nil }), nil, "bad")
		if err := impl.Run(context.Background(), workers); err == nil {
			t.Errorf("Run(ctx, %d) = nil, want an error", workers)
		}
	}
}

// TestRunSpreadsWorkAcrossWorkers shows that N workers reconcile N keys at
// once: each reconcile waits until all have started.
func TestRunSpreadsWorkAcrossWorkers(t *testing.T) {
	const workers = 3
	var wg sync.WaitGroup
	wg.Add(workers)
	var c calls
	r := controller.ReconcilerFunc(func(_ context.Context, key string) error {
		wg.Done()
		wg.Wait()
		c.add(key)
		return nil
	})
	impl := controller.NewImpl(r, nil, "parallel")
	for n := range workers {
		impl.EnqueueKey(fmt.Sprintf("ns/%d", n))
	}
	stop := run(t, impl, workers)
	eventually(t, "all keys reconciled", func() bool { return len(c.get()) == workers })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestErrorHelpers(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name          string
		err           error
		wantPermanent bool
		wantRequeue   bool
		wantAfter     time.Duration
		wantIsBoom    bool
	}{
		{name: "nil", err: nil},
		{name: "plain", err: boom, wantIsBoom: true},
		{name: "permanent", err: controller.NewPermanentError(boom), wantPermanent: true, wantIsBoom: true},
		{name: "wrapped permanent", err: fmt.Errorf("x: %w", controller.NewPermanentError(boom)), wantPermanent: true, wantIsBoom: true},
		{name: "permanent of nil is nil", err: controller.NewPermanentError(nil)},
		{name: "requeue", err: controller.NewRequeueAfter(time.Minute), wantRequeue: true, wantAfter: time.Minute},
		{name: "wrapped requeue", err: fmt.Errorf("x: %w", controller.NewRequeueAfter(time.Second)), wantRequeue: true, wantAfter: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := controller.IsPermanentError(tt.err); got != tt.wantPermanent {
				t.Errorf("IsPermanentError = %v, want %v", got, tt.wantPermanent)
			}
			after, ok := controller.IsRequeueAfter(tt.err)
			if ok != tt.wantRequeue || after != tt.wantAfter {
				t.Errorf("IsRequeueAfter = %v, %v; want %v, %v", after, ok, tt.wantAfter, tt.wantRequeue)
			}
			if got := errors.Is(tt.err, boom); got != tt.wantIsBoom {
				t.Errorf("errors.Is(err, boom) = %v, want %v", got, tt.wantIsBoom)
			}
		})
	}
}

// TestReconcilePanicIsRetriedNotFatal: a panicking reconcile is logged with
// its stack and retried; the process and the other keys carry on.
func TestReconcilePanicIsRetriedNotFatal(t *testing.T) {
	logger, logs := observed()
	var mu sync.Mutex
	calls := map[string]int{}
	r := controller.ReconcilerFunc(func(_ context.Context, key string) error {
		mu.Lock()
		calls[key]++
		n := calls[key]
		mu.Unlock()
		if key == "ns/bad" && n == 1 {
			var m map[string]int
			m["boom"]++ // a nil-map write, as a buggy Do might make
		}
		return nil
	})
	impl := mustNew(t, r, controller.ControllerOptions{Logger: logger, WorkQueueName: "panics", RateLimiter: newCountingLimiter()})
	impl.EnqueueKey("ns/bad")
	impl.EnqueueKey("ns/good")
	stop := run(t, impl, 1)
	eventually(t, "bad key retried to success and good key done", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["ns/bad"] == 2 && calls["ns/good"] == 1
	})
	stop()
	panics := logs.FilterMessage("reconcile panicked").All()
	if len(panics) != 1 {
		t.Fatalf("got %d panic log lines, want 1", len(panics))
	}
	fields := panics[0].ContextMap()
	if stack, _ := fields["stack"].(string); !strings.Contains(stack, "impl_test.go") {
		t.Errorf("stack does not reach the reconciler:\n%s", stack)
	}
	if fields["key"] != "ns/bad" {
		t.Errorf("panic line key = %v, want ns/bad", fields["key"])
	}
}

// mustNew is controller.New failing the test on an error.
func mustNew(t *testing.T, r controller.Reconciler, opts controller.ControllerOptions) *controller.Impl {
	t.Helper()
	impl, err := controller.New(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return impl
}

func TestNewRejectsSettingsOutOfRange(t *testing.T) {
	r := controller.ReconcilerFunc(func(context.Context, string) error { return nil })
	for _, tt := range []struct {
		opts  controller.ControllerOptions
		field string
	}{
		{controller.ControllerOptions{MaxBackoff: -time.Second}, "MaxBackoff"},
		{controller.ControllerOptions{DrainTimeout: -time.Second}, "DrainTimeout"},
		{controller.ControllerOptions{MaxRetries: -2}, "MaxRetries"},
	} {
		if _, err := controller.New(r, tt.opts); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = error %v, want one naming %s", tt.opts, err, tt.field)
		}
	}
	if _, err := controller.New(nil, controller.ControllerOptions{WorkQueueName: "nil"}); err == nil {
		t.Errorf("New(nil reconciler) returned no error")
	}
}
