package controller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/controller"
)

// TestDefaultBackoffSchedule reads the default rate limiter's delays for
// one key failing again and again: doubling from DefaultBaseBackoff, then
// held at the cap for good. A limiter that gave up, or grew past the cap,
// fails the comparison.
func TestDefaultBackoffSchedule(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		opts   controller.ControllerOptions
		want   []time.Duration
		capped time.Duration
	}{{
		name: "default cap of a minute",
		want: []time.Duration{
			5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms,
			1280 * ms, 2560 * ms, 5120 * ms, 10240 * ms, 20480 * ms, 40960 * ms,
			time.Minute, time.Minute, time.Minute, time.Minute, time.Minute, time.Minute,
		},
		capped: time.Minute,
	}, {
		name:   "MaxBackoff",
		opts:   controller.ControllerOptions{MaxBackoff: 30 * ms},
		want:   []time.Duration{5 * ms, 10 * ms, 20 * ms, 30 * ms, 30 * ms, 30 * ms},
		capped: 30 * ms,
	}, {
		name:   "MaxBackoff of zero keeps the default",
		opts:   controller.ControllerOptions{MaxBackoff: 0},
		want:   []time.Duration{5 * ms, 10 * ms, 20 * ms},
		capped: time.Minute,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.WorkQueueName = "schedule"
			impl := mustNew(t, controller.ReconcilerFunc(func(context.Context, string) error { return nil }), tt.opts)
			rl := impl.RateLimiter()
			var got []time.Duration
			for range tt.want {
				got = append(got, rl.When("ns/x"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("delays of consecutive failures (-want +got):\n%s", diff)
			}
			// Long after the cap the delay is still the cap: no give-up.
			for range 1000 {
				rl.When("ns/x")
			}
			if got := rl.When("ns/x"); got != tt.capped {
				t.Errorf("delay after 1000 more failures = %s, want %s", got, tt.capped)
			}
			if got := rl.When("ns/other"); got != 5*ms {
				t.Errorf("first delay of another key = %s, want 5ms (backoff is per key)", got)
			}
			rl.Forget("ns/x")
			if got := rl.When("ns/x"); got != 5*ms {
				t.Errorf("first delay after Forget = %s, want 5ms", got)
			}
		})
	}
}

// TestTransientFailureRecoversWithinOneBackoffStep runs the default rate
// limiter (its cap shortened so the test is quick) on a key that fails
// through many more retries than the old budget of 15, and checks it is
// reconciled once the cause is fixed, at the next step.
func TestTransientFailureRecoversWithinOneBackoffStep(t *testing.T) {
	const capDelay = 20 * time.Millisecond
	var (
		c     calls
		fixed = make(chan struct{})
	)
	r := controller.ReconcilerFunc(func(_ context.Context, key string) error {
		c.add(key)
		select {
		case <-fixed:
			return nil
		default:
			return errors.New("cause not fixed yet")
		}
	})
	logger, logs := observed()
	impl := mustNew(t, r, controller.ControllerOptions{Logger: logger, WorkQueueName: "forever", MaxBackoff: capDelay})
	impl.EnqueueKey("ns/x")
	stop := run(t, impl, 1)
	eventually(t, "40 failed attempts", func() bool { return c.count("ns/x") >= 40 })
	fixedAt := time.Now()
	close(fixed)
	eventually(t, "success after the fix", hasMessage(logs, "reconcile succeeded"))
	took := time.Since(fixedAt)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := logs.FilterMessage("reconcile failed; dropping key after retries").Len(); n != 0 {
		t.Errorf("key dropped %d times, want never", n)
	}
	t.Logf("recovered %s after the fix (backoff cap %s)", took, capDelay)
}
