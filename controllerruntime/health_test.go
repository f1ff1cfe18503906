package controllerruntime

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestChecksFollowThePhase: readiness waits for the caches and fails for
// good once bindkit stopped with an error; liveness fails then too, and
// when the start-up has waited for caches past its timeout (a start-up
// that no longer ends by itself), but not while it may still end.
func TestChecksFollowThePhase(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const timeout = 2 * time.Minute
	failed := errors.New("configmap: watch ConfigMaps in namespace system: caches not synced within Options.CacheSyncTimeout 2m0s")
	for _, tc := range []struct {
		name            string
		p               phase
		at              time.Duration // after t0
		ready, liveness string        // "" for nil
	}{
		{"before Start", phase{}, 0, "bindkit: not started", ""},
		{"waiting for caches", phase{since: t0}, time.Minute, "bindkit: informers have not synced", ""},
		{"waiting, at the timeout", phase{since: t0}, timeout, "bindkit: informers have not synced", ""},
		{"waiting well past the timeout", phase{since: t0}, timeout + stuckSlack + time.Second, "bindkit: informers have not synced",
			"bindkit: caches not synced 2m31s after start-up began, past Options.CacheSyncTimeout 2m0s: start-up is stuck"},
		{"synced", phase{since: t0, synced: true}, time.Hour, "", ""},
		{"stopped with an error", phase{since: t0, failed: failed}, timeout, "bindkit: stopped: " + failed.Error(), "bindkit: stopped: " + failed.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := [2]string{text(readiness(tc.p)), text(liveness(tc.p, t0.Add(tc.at), timeout))}
			if diff := cmp.Diff([2]string{tc.ready, tc.liveness}, got); diff != "" {
				t.Errorf("[readiness, liveness] (-want +got):\n%s", diff)
			}
		})
	}
}

func text(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
