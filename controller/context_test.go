package controller_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
)

// namedReconciler fails its first reconcile, then succeeds.
type namedReconciler struct{ attempts int }

func (r *namedReconciler) Reconcile(context.Context, string) error {
	r.attempts++ // one worker: no race
	if r.attempts == 1 {
		return errors.New("once")
	}
	return nil
}

// NewContext, knative's constructor shape, names the controller, logs with
// the given logger or else the one in ctx, and retries with the given rate
// limiter.
func TestNewContext(t *testing.T) {
	tests := []struct {
		name        string
		options     func(explicit *zap.Logger) controller.ControllerOptions
		wantName    string
		wantLogger  string // "explicit" or "context": which logger hears the Impl
		wantLimiter bool
	}{{
		name: "knative's fields",
		options: func(explicit *zap.Logger) controller.ControllerOptions {
			return controller.ControllerOptions{WorkQueueName: "GithubBinding", Logger: explicit}
		},
		wantName:   "GithubBinding",
		wantLogger: "explicit",
	}, {
		name: "logger from the context",
		options: func(*zap.Logger) controller.ControllerOptions {
			return controller.ControllerOptions{WorkQueueName: "GithubBinding"}
		},
		wantName:   "GithubBinding",
		wantLogger: "context",
	}, {
		name: "name from the reconciler's type, rate limiter used",
		options: func(*zap.Logger) controller.ControllerOptions {
			return controller.ControllerOptions{RateLimiter: newCountingLimiter()}
		},
		wantName:    "*controller_test.namedReconciler",
		wantLogger:  "context",
		wantLimiter: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			explicit, explicitLogs := observed()
			inCtx, ctxLogs := observed()
			ctx := logging.WithLogger(context.Background(), inCtx)
			options := tt.options(explicit)

			impl := controller.NewContext(ctx, &namedReconciler{}, options)
			if got := impl.Name(); got != tt.wantName {
				t.Errorf("Name() = %q, want %q", got, tt.wantName)
			}
			impl.EnqueueKey("ns/obj")
			stop := run(t, impl, 1)
			loggers := map[string]*observer.ObservedLogs{"explicit": explicitLogs, "context": ctxLogs}
			eventually(t, "success logged", hasMessage(loggers[tt.wantLogger], "reconcile succeeded"))
			stop()

			for name, logs := range loggers {
				if name != tt.wantLogger && logs.Len() > 0 {
					t.Errorf("the %s logger heard the Impl: %q", name, logs.All()[0].Message)
				}
			}
			for _, e := range loggers[tt.wantLogger].All() {
				if got := e.ContextMap()["controller"]; got != tt.wantName {
					t.Errorf("line %q: controller = %v, want %s", e.Message, got, tt.wantName)
				}
			}
			if limiter, ok := options.RateLimiter.(*countingLimiter); ok {
				if when, _ := limiter.counts(); when != 1 {
					t.Errorf("rate limiter consulted %d times, want 1 (one failure)", when)
				}
			} else if tt.wantLimiter {
				t.Fatal("test case wants a limiter but gives none")
			}
		})
	}
}
