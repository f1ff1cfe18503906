package processwide

import (
	"sync"
	"testing"
)

func TestSlotFollowsTheLatestAttached(t *testing.T) {
	var s Slot[string]
	if got := s.Load(); got != nil {
		t.Fatalf("empty slot holds %q", *got)
	}
	a, b, c := "a", "b", "c"
	detachA := s.Attach(&a)
	detachB := s.Attach(&b)
	check := func(want *string) {
		t.Helper()
		if got := s.Load(); got != want {
			t.Fatalf("Load() = %v, want %v", got, want)
		}
	}
	check(&b)
	detachA() // not the current one: b stays
	check(&b)
	detachC := s.Attach(&c)
	check(&c)
	detachC()
	check(&b)
	detachB()
	detachB() // twice is harmless
	check(nil)
}

func TestSlotConcurrentUse(t *testing.T) {
	var s Slot[int]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := i
			detach := s.Attach(&v)
			for range 100 {
				s.Load()
			}
			detach()
		})
	}
	wg.Wait()
	if got := s.Load(); got != nil {
		t.Fatalf("after every detach, Load() = %d", *got)
	}
}
