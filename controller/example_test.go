package controller_test

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/controller"
)

// greeter says hello to each object it is asked to reconcile, and asks to
// hear about the last one again a moment later.
type greeter struct {
	stop  context.CancelFunc
	again bool
}

func (g *greeter) Reconcile(_ context.Context, key string) error {
	fmt.Println("reconcile", key)
	switch {
	case key != "default/last":
	case !g.again:
		g.again = true
		return controller.NewRequeueAfter(10 * time.Millisecond)
	default:
		g.stop()
	}
	return nil
}

func ExampleNewImpl() {
	ctx, cancel := context.WithCancel(context.Background())
	g := &greeter{stop: cancel}
	impl := controller.NewImpl(g, zap.NewNop(), "greeter")

	// Informer handlers would call these; keys enqueued before Run wait
	// for it.
	impl.EnqueueKey("default/first")
	impl.EnqueueKey("default/last")

	// One worker keeps the output in order. Run returns once the greeter
	// cancels ctx and the in-flight reconcile has finished.
	if err := impl.Run(ctx, 1); err != nil {
		fmt.Println("run:", err)
	}
	// Output:
	// reconcile default/first
	// reconcile default/last
	// reconcile default/last
}
