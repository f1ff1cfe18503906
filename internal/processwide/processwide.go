// Package processwide holds the target of a hook that a library accepts
// once per process, for components that come and go within one.
//
// klog's logger (klog.SetLogger) and client-go's request metrics
// (k8s.io/client-go/tools/metrics.Register) are process-wide: the first
// is not safe to change while anything logs, the second can be set only
// once. A process built with injection/sharedmain runs one Run; a test
// binary may run several, one after another or at once. So the hook is
// installed once, forwarding to a Slot, and each Run attaches its own
// target to the Slot while it runs: the most recently attached target that
// is still attached receives what the hook forwards, and nothing does when
// none is attached.
package processwide

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Slot holds the current target of a process-wide hook. Its zero value
// holds none. Load is safe for concurrent use with Attach and detach.
type Slot[T any] struct {
	mu       sync.Mutex
	attached []*T
	current  atomic.Pointer[T]
}

// Attach makes t the Slot's target until detach is called, after which
// the target attached before it (and still attached) takes over again.
// detach may be called more than once.
func (s *Slot[T]) Attach(t *T) (detach func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attached = append(s.attached, t)
	s.current.Store(t)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if i := slices.Index(s.attached, t); i >= 0 {
				s.attached = slices.Delete(s.attached, i, i+1)
			}
			var top *T
			if n := len(s.attached); n > 0 {
				top = s.attached[n-1]
			}
			s.current.Store(top)
		})
	}
}

// Load returns the current target, nil when none is attached.
func (s *Slot[T]) Load() *T { return s.current.Load() }
