package psbinding

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSubjectLocks: one patch of a subject at a time, a tryLock of a
// subject held fails, and a lock nobody holds or waits for is forgotten.
func TestSubjectLocks(t *testing.T) {
	var locks subjectLocks
	a, b := subjectKey{gvr: deploymentsGVR, namespace: "ns", name: "a"}, subjectKey{gvr: deploymentsGVR, namespace: "ns", name: "b"}
	held, ok := locks.tryLock(a)
	if !ok {
		t.Fatal("tryLock of a subject nobody holds failed")
	}
	if _, ok := locks.tryLock(a); ok {
		t.Fatal("tryLock of a subject held succeeded")
	}
	other, ok := locks.tryLock(b)
	if !ok {
		t.Fatal("tryLock of another subject failed")
	}
	locks.unlock(other)
	locks.unlock(held)
	if n := len(locks.locks); n != 0 {
		t.Errorf("%d locks kept after every holder left, want 0", n)
	}

	// Many patches of one subject: never two at once.
	var wg sync.WaitGroup
	inside, most := 0, 0
	var mu sync.Mutex
	for range 50 {
		wg.Go(func() {
			l := locks.lock(a)
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			mu.Lock()
			inside--
			mu.Unlock()
			locks.unlock(l)
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d patches of one subject at once, want 1", most)
	}
	if n := len(locks.locks); n != 0 {
		t.Errorf("%d locks kept after every holder left, want 0", n)
	}
}

// TestSubjectLocksRecent: a subject patched less than recentPatch ago is
// read from etcd; the record of one patched longer ago is forgotten once
// many subjects are remembered.
func TestSubjectLocksRecent(t *testing.T) {
	var locks subjectLocks
	now := time.Unix(1700000000, 0)
	key := func(i int) subjectKey { return subjectKey{gvr: deploymentsGVR, namespace: "ns", name: fmt.Sprint(i)} }
	locks.patched(key(0), now)
	tests := []struct {
		name string
		key  subjectKey
		at   time.Time
		want bool
	}{
		{"just patched", key(0), now, true},
		{"patched a moment ago", key(0), now.Add(recentPatch - time.Millisecond), true},
		{"patched long ago", key(0), now.Add(recentPatch), false},
		{"never patched", key(1), now, false},
	}
	for _, tt := range tests {
		if got := locks.patchedRecently(tt.key, tt.at); got != tt.want {
			t.Errorf("%s: patchedRecently = %v, want %v", tt.name, got, tt.want)
		}
	}
	later := now.Add(2 * recentPatch)
	for i := 1; i <= sweepAt; i++ {
		locks.patched(key(i), later)
	}
	if _, ok := locks.recent[key(0)]; ok {
		t.Errorf("a subject patched %v before is still remembered among %d", 2*recentPatch, len(locks.recent))
	}
}

// BenchmarkSubjectLocksBurst is the bookkeeping of a burst of patches of
// many subjects, all within recentPatch: O(1) a patch, not a sweep each.
func BenchmarkSubjectLocksBurst(b *testing.B) {
	var locks subjectLocks
	now := time.Unix(1700000000, 0)
	keys := make([]subjectKey, 50000)
	for i := range keys {
		keys[i] = subjectKey{gvr: deploymentsGVR, namespace: "ns", name: fmt.Sprint(i)}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[i%len(keys)]
		l, _ := locks.tryLock(k)
		locks.patched(k, now)
		locks.unlock(l)
	}
}
