package wiring

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

// How a path is seen in force: probesInForce probes in a row, probeInterval
// apart (with several kube-apiservers, each probe may reach another), the
// next attempt probeRetry after a probe that failed, refusalRetry after
// one the kube-apiserver refused (an operator's change ends that, not
// time).
const (
	probeKeyPrefix = "probe/"
	probesInForce  = 3
	probeInterval  = 200 * time.Millisecond
	probeRetry     = 2 * time.Second
	refusalRetry   = 15 * time.Second
)

// handover is a declarative kind's admission by MutatingAdmissionPolicy:
// it keeps the policy and its bindings (one per Binding) programmed
// (objects) and, until probes see the policy in force, the kind's webhook
// in the path, so that no subject is created while neither admits (the
// kube-apiserver loads a policy or a binding some time after it is
// written). Both paths apply the same Spec by name, so an object both
// admit is bound once. It reconciles three kinds of key: the admission
// controller's (the webhook, programmed with no rules once the policy is
// in force), the policy objects', and probeKey. Only the leader probes and
// writes; a new leader probes again (its webhook is in the path
// meanwhile).
//
// In force means: every Binding whose binding was written since the
// policy was last seen in force (every Binding, after the policy itself
// was written or a new leader took over) is applied by the policy to a
// probe, probesInForce times in a row with no write in between.
type handover struct {
	*psbinding.AdmissionReconciler
	objects *policy.Reconciler
	prober  *prober
	logger  *zap.Logger
	// probeKey is the probe's work-queue key; policy names the policy,
	// read through policies; opts are its options.
	probeKey, policy string
	policies         admissionlisters.MutatingAdmissionPolicyLister
	opts             policy.MutatingPolicyOptions
	kube             kubernetes.Interface
	enqueue          func(key string)
	// inForce: probes saw the policy in force since it was last written.
	inForce atomic.Bool

	mu sync.Mutex
	// seen counts the probes in a row that saw it; epoch counts the
	// writes, so that a probe begun before one does not count.
	seen, epoch int
	// all: probe with every Binding; else with those pending, whose
	// binding was written since the policy was last seen in force.
	all     bool
	pending map[types.NamespacedName]bool
}

func newHandover(logger *zap.Logger, kube kubernetes.Interface, policyName string, policies admissionlisters.MutatingAdmissionPolicyLister, opts policy.MutatingPolicyOptions) *handover {
	return &handover{logger: logger, kube: kube, probeKey: probeKeyPrefix + policyName, policy: policyName, policies: policies, opts: opts,
		all: true, pending: map[types.NamespacedName]bool{}}
}

var (
	_ controller.Reconciler  = (*handover)(nil)
	_ controller.LeaderAware = (*handover)(nil)
)

// Reconcile implements controller.Reconciler.
func (h *handover) Reconcile(ctx context.Context, key string) error {
	switch key {
	case h.AdmissionReconciler.Key():
		return h.AdmissionReconciler.Reconcile(ctx, key)
	case h.probeKey:
		return h.reconcileProbe(ctx)
	}
	return h.objects.Reconcile(ctx, key)
}

// Promote implements controller.LeaderAware: both controllers, then a
// probe.
func (h *handover) Promote(enqueue func(string)) {
	h.AdmissionReconciler.Promote(enqueue)
	h.objects.Promote(enqueue)
	enqueue(h.probeKey)
}

// Demote implements controller.LeaderAware. What this replica saw stops
// counting: whoever leads next probes again, with every Binding.
func (h *handover) Demote() {
	h.AdmissionReconciler.Demote()
	h.objects.Demote()
	h.faults().clear()
	h.inForce.Store(false)
	h.mu.Lock()
	h.seen, h.all = 0, true
	h.epoch++
	h.mu.Unlock()
}

// Uninstall implements sharedmain.Uninstaller: the policy and its
// bindings go first, so that nothing new is bound by them, then the
// webhook's rules; then it waits (up to uninstallWait) until probes are
// admitted by neither, as the kube-apiserver stops applying them some
// time after, so that the subjects unbound next are not bound again by a
// create in between.
func (h *handover) Uninstall(ctx context.Context) error {
	if removed, err := policy.RemoveMutatingPolicy(ctx, h.kube, h.policy); err != nil {
		return fmt.Errorf("uninstall: %w", err)
	} else if removed {
		h.logger.Info("uninstall: admission policy removed", zap.String("policy", h.policy))
	}
	if err := h.AdmissionReconciler.Uninstall(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, uninstallWait)
	defer cancel()
	for seen := 0; seen < probesInForce; {
		res, ok, err := h.prober.probe(ctx)
		switch {
		case err == nil && (!ok || (!res.policyApplied && !res.webhookCalled)):
			seen++
		case ctx.Err() != nil:
			h.logger.Warn("uninstall: admission may still apply the kind for a moment; subjects created meanwhile may stay bound",
				zap.Duration("waited", uninstallWait), zap.Error(err))
			return nil
		default:
			seen = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(probeInterval):
		}
	}
	return nil
}

// uninstallWait bounds how long Uninstall waits for the kube-apiserver to
// stop applying the policy and calling the webhook.
const uninstallWait = 30 * time.Second

// written is told that the binding of ref's Binding was created or
// restored (before changed is).
func (h *handover) written(ref policy.BindingRef) {
	h.mu.Lock()
	h.pending[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = true
	h.mu.Unlock()
}

// policyChanged is told that the policy was written: every Binding is
// probed again.
func (h *handover) policyChanged() {
	h.mu.Lock()
	h.all = true
	h.mu.Unlock()
	h.changed()
}

// changed is told that the policy or a binding was written: the
// kube-apiserver has yet to load it, so the webhook comes back into the
// path until probes see it.
func (h *handover) changed() {
	h.inForce.Store(false)
	h.mu.Lock()
	h.seen = 0
	h.epoch++
	h.mu.Unlock()
	h.enqueue(h.AdmissionReconciler.Key())
	h.enqueue(h.probeKey)
}

// bindingChanged is told of every event of the kind's Bindings: the set
// of bindings (setKey) follows them, and while the policy is not seen in
// force, a Binding that publishes its Spec may be the first to probe with.
func (h *handover) bindingChanged(setKey string) {
	if h.enqueue == nil {
		return
	}
	h.enqueue(setKey)
	if !h.inForce.Load() {
		h.enqueue(h.probeKey)
	}
}

// reconcileProbe probes until the policy is seen in force probesInForce
// times in a row, then takes the webhook out of the path.
func (h *handover) reconcileProbe(ctx context.Context) error {
	if !h.IsLeader() || h.inForce.Load() {
		return nil
	}
	if _, err := h.policies.Get(h.policy); err != nil {
		return nil // its creation brings the key back
	}
	h.mu.Lock()
	epoch, all, pending := h.epoch, h.all, maps.Clone(h.pending)
	h.mu.Unlock()
	res, probed, err := h.prober.probeEach(ctx, func(b psbinding.Bindable) bool {
		if !all && !pending[types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}] {
			return false
		}
		// A Binding the policy cannot be bound with is the reconciler's.
		_, err := policy.MutatingPolicyBinding(h.opts, bindingRef(b))
		return err == nil
	})
	h.faults().report(err)
	switch {
	case isRefusal(err):
		return controller.NewRequeueAfter(refusalRetry) // reported: logged, evented, unready
	case err != nil:
		h.logger.Info("probe of the admission path failed; the webhook stays in the path", zap.Error(err))
		return controller.NewRequeueAfter(probeRetry)
	case probed == 0 && all:
		return nil // no Binding published: nothing to admit yet; one that publishes brings the key back
	case probed > 0 && !res.policyApplied:
		h.mu.Lock()
		h.seen = 0
		h.mu.Unlock()
		return controller.NewRequeueAfter(probeInterval)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.epoch != epoch {
		return controller.NewRequeueAfter(probeInterval) // written since: probe again
	}
	if h.seen++; probed > 0 && h.seen < probesInForce {
		return controller.NewRequeueAfter(probeInterval)
	}
	h.all = false
	for k := range pending {
		delete(h.pending, k)
	}
	h.inForce.Store(true)
	h.logger.Info("admission policy seen in force: the webhook leaves the path", zap.String("policy", h.policy),
		zap.String("probedWith", res.binding), zap.Int("bindingsProbed", probed))
	h.enqueue(h.AdmissionReconciler.Key())
	return nil
}

// Check implements webhook.Checker: the refusal of the last probe round.
func (h *handover) Check() error { return h.faults().Check() }

// Check implements webhook.Checker: the refusal of the last probe round.
func (r *retiringAdmission) Check() error { return r.faults().Check() }

// Demote implements controller.LeaderAware: a replica that no longer
// probes no longer reports a refusal (whoever leads next probes again).
func (r *retiringAdmission) Demote() {
	r.AdmissionReconciler.Demote()
	r.faults().clear()
}

// Check implements webhook.Checker: the inner reconciler's, when it has one.
func (w *withGuard) Check() error {
	if c, ok := w.inner.(webhook.Checker); ok {
		return c.Check()
	}
	return nil
}

func (h *handover) faults() *probeFaults {
	if h.prober == nil {
		return nil
	}
	return h.prober.faults
}

func (r *retiringAdmission) faults() *probeFaults {
	if r.prober == nil {
		return nil
	}
	return r.prober.faults
}

// isRefusal reports whether err is a probe round with refused probes.
func isRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

// notifyingObject calls changed when its Object is created or restored.
type notifyingObject struct {
	policy.Object
	changed func()
}

// Ensure implements policy.Object.
func (o notifyingObject) Ensure(ctx context.Context) (policy.Action, error) {
	a, err := o.Object.Ensure(ctx)
	if a == policy.Created || a == policy.Restored {
		o.changed()
	}
	return a, err
}
