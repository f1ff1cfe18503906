package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindkit/bindkit/controller"
)

// calls records the keys a reconciler was called with, in order.
type calls struct {
	mu   sync.Mutex
	keys []string
}

func (c *calls) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, key)
}

func (c *calls) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

func (c *calls) count(key string) int {
	n := 0
	for _, k := range c.get() {
		if k == key {
			n++
		}
	}
	return n
}

// countingLimiter is a rate limiter with no delay that counts how often a
// key was rate limited (a retry) and forgotten.
type countingLimiter struct {
	mu       sync.Mutex
	failures map[string]int
	when     int
	forget   int
}

func newCountingLimiter() *countingLimiter { return &countingLimiter{failures: map[string]int{}} }

func (l *countingLimiter) When(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[key]++
	l.when++
	return 0
}

func (l *countingLimiter) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, key)
	l.forget++
}

func (l *countingLimiter) NumRequeues(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[key]
}

func (l *countingLimiter) counts() (when, forget int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.when, l.forget
}

// observed returns a debug-level logger whose entries the test can read.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// eventually polls cond until it holds, failing t after a generous bound;
// the bound guards against hangs and proves nothing about speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// run starts impl.Run and returns a stop function that cancels it and
// returns Run's error once Run has returned.
func run(t *testing.T, impl *controller.Impl, workers int) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- impl.Run(ctx, workers) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func hasMessage(logs *observer.ObservedLogs, msg string) func() bool {
	return func() bool { return logs.FilterMessage(msg).Len() > 0 }
}

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }
