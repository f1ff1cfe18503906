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
