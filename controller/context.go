package controller

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindkit/bindkit/controller/logging"
)

// ControllerOptions configures New and NewContext. Zero fields take the
// documented defaults; New returns an error naming a field set wrongly. It
// has the shape of knative's controller.ControllerOptions (WorkQueueName,
// Logger) so that code ported from knative.dev/pkg compiles, and holds
// bindkit's queue settings besides.
type ControllerOptions struct {
	// WorkQueueName names the controller in logs and queue metrics.
	// Default for NewContext: the reconciler's Go type, such as
	// "*psbinding.BaseReconciler"; New leaves it empty.
	WorkQueueName string
	// Logger is the Impl's logger. Default for NewContext: the logger ctx
	// carries (logging.FromContext), which sharedmain sets; New logs
	// nothing.
	Logger *zap.Logger
	// RateLimiter replaces the retry rate limiter. A rate limiter keeps
	// per-key state: give each Impl its own. It takes precedence over
	// MaxBackoff. Default: per-key exponential backoff from
	// DefaultBaseBackoff doubling up to MaxBackoff, with no limit over all
	// keys: the workers and the client's QPS bound the total.
	RateLimiter workqueue.TypedRateLimiter[string]
	// MaxBackoff caps the default rate limiter's backoff. It has no effect
	// with RateLimiter. Default: DefaultMaxBackoff. Negative is an error.
	MaxBackoff time.Duration
	// MaxRetries makes the Impl drop a key, with an error log, after it
	// failed MaxRetries retries in a row; the key comes back with the next
	// event or resync. NoRetries drops a key at its first failure.
	// Default: 0, which retries a failing key without end. Below NoRetries
	// is an error.
	MaxRetries int
	// DrainTimeout is how long in-flight reconciles may run after Run's
	// context ends before their own context is cancelled; Run waits for
	// them to return either way. Default: DefaultDrainTimeout. Negative is
	// an error.
	DrainTimeout time.Duration
	// Observer is told of every reconcile's outcome and of the work
	// queue's metrics, and reconcilers find it in the contexts Run passes
	// them (ObserverFrom). Default: the Observer of Run's context
	// (WithObserver), which is how injection/sharedmain reaches the Impls
	// that constructors of the knative shape build; none when it has none.
	Observer Observer
}

// NewContext is New in the shape of knative's controller.NewContext: it
// names the Impl options.WorkQueueName or else after r's Go type, and logs
// with options.Logger or else the logger in ctx. It returns no error, as
// knative's does, so it panics where New returns an error (a nil r, a
// setting out of range).
func NewContext(ctx context.Context, r Reconciler, options ControllerOptions) *Impl {
	if options.WorkQueueName == "" && r != nil {
		options.WorkQueueName = fmt.Sprintf("%T", r)
	}
	if options.Logger == nil {
		options.Logger = logging.FromContext(ctx)
	}
	impl, err := New(r, options)
	if err != nil {
		panic("controller.NewContext: " + err.Error())
	}
	return impl
}
