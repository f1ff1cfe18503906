package controller_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/bindkit/bindkit/controller"
)

// BenchmarkReconcileLoop measures the queue round trip: enqueue a distinct
// key, hand it to one of two workers, run a no-op Reconcile (with its logger
// and reconcile ID), forget it.
func BenchmarkReconcileLoop(b *testing.B) {
	keys := make([]string, b.N)
	for n := range keys {
		keys[n] = "ns/obj-" + strconv.Itoa(n)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	impl := controller.NewImpl(controller.ReconcilerFunc(func(context.Context, string) error {
		if done.Add(1) == int64(b.N) {
			close(finished)
		}
		return nil
	}), nil, "bench")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { impl.Run(ctx, 2); close(stopped) }()
	b.ReportAllocs()
	b.ResetTimer()
	for _, key := range keys {
		impl.EnqueueKey(key)
	}
	<-finished
	b.StopTimer()
	cancel()
	<-stopped
}

// BenchmarkEnqueueFiltered measures what an informer event costs before
// the queue: a filter and HandleAll calling Enqueue on a running Impl, for
// an object the filter rejects and one it passes (same key each time, so
// the queue deduplicates).
func BenchmarkEnqueueFiltered(b *testing.B) {
	impl := controller.NewImpl(controller.ReconcilerFunc(func(context.Context, string) error { return nil }), nil, "bench")
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { impl.Run(ctx, 1); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	filter := controller.FilterWithLabel("app", "web")
	handle := controller.HandleAll(impl.Enqueue)
	for _, bc := range []struct {
		name string
		obj  any
	}{
		{"rejected", pod("ns", "db", map[string]string{"app": "db"})},
		{"passed", pod("ns", "web", map[string]string{"app": "web"})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if filter(bc.obj) {
					handle.OnUpdate(bc.obj, bc.obj)
				}
			}
		})
	}
}
