package controllerruntime

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/bindkit/bindkit/webhook"
)

// HealthzCheckName is the name of the liveness check Add registers on the
// Manager: failing once bindkit's runnable has stopped with an error while
// the Manager still runs, and when its start-up has waited for its caches
// well past Options.CacheSyncTimeout (a start-up that no longer ends by
// itself, which a restart ends).
const HealthzCheckName = ReadyzCheckName

// stuckSlack is how long past Options.CacheSyncTimeout a start-up may still
// be waiting for its caches before the liveness check fails: the wait is
// bounded by that timeout, so this is a watchdog, not a schedule.
const stuckSlack = 30 * time.Second

// phase is what the Manager's checks read of the binder.
type phase struct {
	// since is when Start began waiting for the caches; zero before.
	since time.Time
	// synced: the caches synced and the controllers run.
	synced bool
	// failed is what Start returned, when it returned an error.
	failed error
}

// readiness says why bindkit must not receive admissions yet, or nil:
// its caches have not synced, or it stopped with an error.
func readiness(p phase) error {
	switch {
	case p.failed != nil:
		return fmt.Errorf("bindkit: stopped: %w", p.failed)
	case p.since.IsZero():
		return errors.New("bindkit: not started")
	case !p.synced:
		return errors.New("bindkit: informers have not synced")
	}
	return nil
}

// liveness says why the process should be restarted, or nil: bindkit
// stopped with an error while the Manager runs on, or its start-up has
// waited for caches longer than timeout (with stuckSlack) at now.
func liveness(p phase, now time.Time, timeout time.Duration) error {
	switch {
	case p.failed != nil:
		return fmt.Errorf("bindkit: stopped: %w", p.failed)
	case !p.since.IsZero() && !p.synced && now.Sub(p.since) > timeout+stuckSlack:
		return fmt.Errorf("bindkit: caches not synced %s after start-up began, past Options.CacheSyncTimeout %s: start-up is stuck",
			now.Sub(p.since).Round(time.Second), timeout)
	}
	return nil
}

// tracker keeps the binder's phase for the checks, which the Manager's
// probe server calls concurrently with Start.
type tracker struct {
	mu sync.Mutex
	p  phase
}

func (t *tracker) get() phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

func (t *tracker) set(f func(*phase)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.p)
}

// ready is the Manager's readiness check: bindkit's informers have synced,
// it has not stopped with an error, and every admission controller
// answers (webhook.Server's /readyz).
func (b *binder) ready(*http.Request) error {
	if err := readiness(b.phase.get()); err != nil {
		return err
	}
	if b.handler == nil {
		return nil
	}
	w := &statusRecorder{code: http.StatusOK}
	req, _ := http.NewRequest(http.MethodGet, webhook.ReadyzPath, nil)
	b.handler.ProbeHandler().ServeHTTP(w, req)
	if w.code != http.StatusOK {
		return fmt.Errorf("bindkit: admission: %s", w.body)
	}
	return nil
}

// alive is the Manager's liveness check (see liveness).
func (b *binder) alive(*http.Request) error {
	return liveness(b.phase.get(), time.Now(), b.opts.CacheSyncTimeout)
}

// statusRecorder keeps the status and body of a probe's answer.
type statusRecorder struct {
	code int
	body []byte
}

func (w *statusRecorder) Header() http.Header { return http.Header{} }
func (w *statusRecorder) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}
func (w *statusRecorder) WriteHeader(code int) { w.code = code }
