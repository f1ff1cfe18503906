package psbinding

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// subjectLocks serialize this process's patches of one subject. Bindings
// that select the same subjects reconcile at once, and their patches of a
// subject would race: every one but the first fails its guard, waits and
// reads again (2,051 conflicts for the 2,200 patches that bind 200
// Deployments under 11 Bindings each). A patch that comes soon after
// another of this process (recentPatch) reads the subject from etcd
// rather than from a cache, or a page listed before, that may not show
// that patch yet.
//
// A lock lives while a patch holds it or waits for it, a subject's last
// patch time about recentPatch: memory is bounded by the patches in
// flight and the rate of patches. The zero value is ready to use.
type subjectLocks struct {
	mu    sync.Mutex
	locks map[subjectKey]*subjectLock
	// recent is when this process last patched each subject, kept about
	// recentPatch.
	recent map[subjectKey]time.Time
	// nextSweep is the size of recent at which it is swept next.
	nextSweep int
}

// recentPatch is how long after a patch of this process the subject is
// read from etcd: the kube-apiserver's cache shows a patch within
// milliseconds, or a second on a busy server; a page of a LIST can be
// older.
const recentPatch = 10 * time.Second

// sweepAt is the least number of subjects remembered at which those
// patched more than recentPatch ago are forgotten.
const sweepAt = 1024

// subjectKey names one subject.
type subjectKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// subjectLock is one subject's lock.
type subjectLock struct {
	key subjectKey
	mu  sync.Mutex // held by the patch of the subject in flight
	// refs counts the holder and the waiters (under subjectLocks.mu).
	refs int
}

// patched records that this process patched k's subject at now.
func (l *subjectLocks) patched(k subjectKey, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) >= max(sweepAt, l.nextSweep) {
		for old, at := range l.recent {
			if now.Sub(at) > recentPatch {
				delete(l.recent, old)
			}
		}
		// A burst of patches of many subjects keeps them all: the next
		// sweep waits for twice as many, so sweeps cost O(1) a patch.
		l.nextSweep = 2 * len(l.recent)
	}
	if l.recent == nil {
		l.recent = map[subjectKey]time.Time{}
	}
	l.recent[k] = now
}

// patchedRecently says whether this process patched k's subject less than
// recentPatch before now.
func (l *subjectLocks) patchedRecently(k subjectKey, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.recent[k]
	return ok && now.Sub(at) < recentPatch
}

// tryLock locks k's subject unless another patch holds it.
func (l *subjectLocks) tryLock(k subjectKey) (*subjectLock, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.get(k)
	if !s.mu.TryLock() {
		return nil, false
	}
	s.refs++
	return s, true
}

// lock locks k's subject, waiting for the patch that holds it.
func (l *subjectLocks) lock(k subjectKey) *subjectLock {
	l.mu.Lock()
	s := l.get(k)
	s.refs++
	l.mu.Unlock()
	s.mu.Lock()
	return s
}

// unlock releases s, and forgets it once nobody holds or waits for it.
func (l *subjectLocks) unlock(s *subjectLock) {
	s.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(l.locks, s.key)
	}
}

// get returns k's lock, made if needed (under l.mu).
func (l *subjectLocks) get(k subjectKey) *subjectLock {
	if s, ok := l.locks[k]; ok {
		return s
	}
	if l.locks == nil {
		l.locks = map[subjectKey]*subjectLock{}
	}
	s := &subjectLock{key: k}
	l.locks[k] = s
	return s
}
