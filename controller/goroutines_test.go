package controller_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/controller"
)

// TestNothingOutlivesRunAndRunLeaderElected checks that the goroutines Run
// and RunLeaderElected start (workers, the queue's delay loop, the elector)
// are gone once they return, and that NewImpl and Enqueue start none. It is
// not parallel, so other tests' goroutines can only end while it runs.
func TestNothingOutlivesRunAndRunLeaderElected(t *testing.T) {
	baseline := runtime.NumGoroutine()

	impl := controller.NewImpl(newLeaderReconciler("ns/owned"), nil, "leaks")
	impl.EnqueueKey("ns/a")
	impl.EnqueueKeyAfter("ns/later", time.Hour) // keeps the delay loop busy
	if got := runtime.NumGoroutine(); got > baseline {
		t.Errorf("NewImpl and Enqueue started %d goroutines", got-baseline)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { impl.Run(ctx, 4); done <- struct{}{} }()
	go func() {
		controller.RunLeaderElected(ctx, fake.NewClientset(), leaseConfig("ns", "leaks", "a"), impl)
		done <- struct{}{}
	}()
	eventually(t, "promotion", impl.IsLeader)
	cancel()
	<-done
	<-done
	eventually(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= baseline })
}
