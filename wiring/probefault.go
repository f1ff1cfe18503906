package wiring

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

// ReasonAdmissionProbeRefused is the reason of the Warning event on a
// Binding whose probe of the admission path the kube-apiserver refused.
const ReasonAdmissionProbeRefused = "AdmissionProbeRefused"

// errNamespacesUnsynced: the namespaces' cache did not sync within
// namespaceSyncWait (their list or watch refused, say).
var errNamespacesUnsynced = errors.New("the namespaces' cache has not synced (the process needs list and watch on namespaces)")

// refused reports whether err is a probe the process cannot make, whoever
// it probes with, until an operator acts: the kube-apiserver refused the
// process's identity (401), or refused the probe (403: RBAC, a quota, an
// admission policy) other than for a namespace being deleted (which
// refuses every create there, and is no fault), or the namespaces' cache
// never synced.
func refused(err error) bool {
	switch {
	case errors.Is(err, errNamespacesUnsynced), apierrors.IsUnauthorized(err):
		return true
	case apierrors.IsForbidden(err):
		return !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
	}
	return false
}

// refusal is the probes of one round that were refused, by Binding: an
// error when it holds any (err).
type refusal struct {
	bindings []psbinding.Bindable
	errs     []error
}

func (r *refusal) add(b psbinding.Bindable, err error) {
	r.bindings = append(r.bindings, b)
	r.errs = append(r.errs, err)
}

// err is r as an error, nil when no probe was refused.
func (r *refusal) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return r
}

func (r *refusal) Error() string {
	return fmt.Sprintf("the kube-apiserver refused %d probe(s) of the admission path: %v", len(r.errs), errors.Join(r.errs...))
}

func (r *refusal) Unwrap() []error { return r.errs }

// probeFaults reports probes of the admission path that are refused, so
// that a handover held by a refusal is never silent: each refused round
// is logged as an error and recorded as a Warning event on every Binding
// refused, and the process's /readyz fails (webhook.Checker) until a
// round is not refused. Only the leader probes, so only its readiness
// follows: the webhook's other replicas go on answering. Safe for
// concurrent use.
type probeFaults struct {
	logger   *zap.Logger
	recorder record.EventRecorder // nil: no events
	// what names the path, in messages: "the webhook leaves the path".
	what string

	mu    sync.Mutex
	fault error
}

var _ webhook.Checker = (*probeFaults)(nil)

// report records err, a probe round's outcome (nothing on a nil f): a *refusal is a
// fault (logged, evented, reported by Check); anything else clears it.
func (f *probeFaults) report(err error) {
	if f == nil {
		return
	}
	var refusal *refusal
	if !errors.As(err, &refusal) {
		f.clear()
		return
	}
	fault := fmt.Errorf("probe of the admission path refused: %w; until it is not, %s", err, f.what)
	f.mu.Lock()
	f.fault = fault
	f.mu.Unlock()
	f.logger.Error("probe of the admission path refused by the kube-apiserver; an operator must act (RBAC: create on the subjects' kinds, get and patch on a kind whose existing object a Binding names, list and watch on namespaces)",
		zap.String("until", f.what), zap.Error(err))
	if f.recorder == nil {
		return
	}
	for i, b := range refusal.bindings {
		f.recorder.Eventf(b, corev1.EventTypeWarning, ReasonAdmissionProbeRefused,
			"Probe of the admission path refused; until it is not, %s: %s", f.what, firstLine(refusal.errs[i]))
	}
}

// clear ends a fault, after a round with no refusal, or on losing the
// lead.
func (f *probeFaults) clear() {
	if f == nil {
		return
	}
	f.mu.Lock()
	was := f.fault
	f.fault = nil
	f.mu.Unlock()
	if was != nil {
		f.logger.Info("probes of the admission path are no longer refused")
	}
}

// Check implements webhook.Checker: the refusal of the last round.
func (f *probeFaults) Check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fault
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
