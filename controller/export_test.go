package controller

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// PendingKeys returns the keys enqueued before Run and the delay each was
// enqueued with, rounded up to whole minutes so tests compare stable values.
func (i *Impl) PendingKeys() map[string]time.Duration {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := time.Now()
	out := map[string]time.Duration{}
	for key, due := range i.pending {
		out[key] = max(due.Sub(now), 0).Round(time.Minute)
	}
	return out
}

// RateLimiter returns the Impl's retry rate limiter, so tests can read the
// backoff schedule without waiting for it.
func (i *Impl) RateLimiter() workqueue.TypedRateLimiter[string] { return i.opts.rateLimiter }
