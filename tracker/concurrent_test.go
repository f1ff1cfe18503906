package tracker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestConcurrentUse runs tracking, lookups, notifications, sweeps, untracks
// and observer deletion from several goroutines at once; run with -race.
// The clock moves while they run, so leases expire and lazy cleanup races
// with renewal too.
func TestConcurrentUse(t *testing.T) {
	const (
		workers = 8
		rounds  = 200
		lease   = time.Second
	)
	clock := newFakeClock()
	var notified atomic.Int64
	var tr Interface
	tr, err := NewWithOptions(Options{Lease: lease, Clock: clock.Now, Callback: func(o Observer) {
		notified.Add(1)
		// Re-entering from the callback must be safe under contention too.
		if _, err := tr.GetObserversKind(podGK, deployment("default", "p", nil)); err != nil {
			t.Error(err)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			o := observer(envBindingGK, "default", fmt.Sprint("b", w))
			app := fmt.Sprint("app", w%3)
			for i := range rounds {
				refs := []Reference{
					byName("apps/v1", "Deployment", "default", app),
					bySelector("apps/v1", "Deployment", "default", matchLabels("app", app)),
					bySelector("v1", "Pod", "default", matchLabels("app", app, "n", fmt.Sprint(i%5))),
				}
				for _, r := range refs {
					if err := tr.TrackReference(r, o); err != nil {
						t.Error(err)
						return
					}
				}
				if err := tr.OnChangedKind(deploymentGK, deployment("default", app, map[string]string{"app": app})); err != nil {
					t.Error(err)
				}
				if _, err := tr.GetObservers(unstructuredObj("v1", "Pod", "default", "p", map[string]string{"app": app, "n": "1"})); err != nil {
					t.Error(err)
				}
				switch i % 10 {
				case 3:
					clock.Step(lease / 3)
				case 5:
					tr.Sweep()
				case 7:
					if err := tr.UntrackReference(refs[2], o); err != nil {
						t.Error(err)
					}
				case 9:
					tr.OnDeletedObserver(o)
				}
			}
			tr.OnDeletedObserver(o)
		})
	}
	wg.Wait()

	if notified.Load() == 0 {
		t.Error("no observer was ever notified")
	}
	if diff := cmp.Diff(registrations{}, countRegistrations(tr)); diff != "" {
		t.Errorf("registrations left after every observer was deleted (-want +got):\n%s", diff)
	}
}
