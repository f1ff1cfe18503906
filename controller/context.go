package controller

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindkit/bindkit/controller/logging"
)

// ControllerOptions configures NewContext. It has the shape of knative's
// controller.ControllerOptions so that code ported from knative.dev/pkg
// compiles; new code calls NewImpl.
type ControllerOptions struct {
	// WorkQueueName names the controller, as NewImpl's name does. Default:
	// the reconciler's Go type, such as "*psbinding.BaseReconciler".
	WorkQueueName string
	// Logger is the Impl's logger. Default: the logger ctx carries
	// (logging.FromContext), which sharedmain sets.
	Logger *zap.Logger
	// RateLimiter replaces the retry rate limiter, as WithRateLimiter does.
	// Default: workqueue.DefaultTypedControllerRateLimiter.
	RateLimiter workqueue.TypedRateLimiter[string]
}

// NewContext is NewImpl in the shape of knative's controller.NewContext: it
// returns an Impl that feeds keys to r, named options.WorkQueueName, logging
// with options.Logger or else the logger in ctx. opts apply after options.
// It panics, as NewImpl does, when r is nil.
func NewContext(ctx context.Context, r Reconciler, options ControllerOptions, opts ...Option) *Impl {
	name := options.WorkQueueName
	if name == "" && r != nil {
		name = fmt.Sprintf("%T", r)
	}
	logger := options.Logger
	if logger == nil {
		logger = logging.FromContext(ctx)
	}
	if options.RateLimiter != nil {
		opts = append([]Option{WithRateLimiter(options.RateLimiter)}, opts...)
	}
	return NewImpl(r, logger, name, opts...)
}
