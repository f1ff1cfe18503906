package wiring

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
)

// How a path is seen in force: probesInForce probes in a row, probeInterval
// apart (with several kube-apiservers, each probe may reach another), the
// next attempt probeRetry after a probe that failed.
const (
	probeKeyPrefix = "probe/"
	probesInForce  = 3
	probeInterval  = 200 * time.Millisecond
	probeRetry     = 2 * time.Second
)

// handover is a declarative kind's admission by MutatingAdmissionPolicy:
// it keeps the policy and its binding programmed (objects) and, until a
// probe sees the policy in force, the kind's webhook in the path, so that
// no subject is created while neither admits (the kube-apiserver loads a
// policy some time after it is written). Both paths apply the same Spec
// by name, so an object both admit is bound once. It reconciles three
// kinds of key: the admission controller's (the webhook, programmed with
// no rules once the policy is in force), the policy objects', and
// probeKey. Only the leader probes and writes; a new leader probes again
// (its webhook is in the path meanwhile).
type handover struct {
	*psbinding.AdmissionReconciler
	objects *policy.Reconciler
	prober  *prober
	logger  *zap.Logger
	// probeKey is the probe's work-queue key; policy names the policy and
	// its binding, read through policies and pbindings.
	probeKey, policy string
	policies         admissionlisters.MutatingAdmissionPolicyLister
	pbindings        admissionlisters.MutatingAdmissionPolicyBindingLister
	enqueue          func(key string)
	// inForce: probes saw the policy in force since it was last written;
	// seen counts the probes in a row that saw it.
	inForce atomic.Bool
	seen    atomic.Int32
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
// counting: whoever leads next probes again.
func (h *handover) Demote() {
	h.AdmissionReconciler.Demote()
	h.objects.Demote()
	h.inForce.Store(false)
	h.seen.Store(0)
}

// changed is told that the policy or its binding was written (created or
// restored): the kube-apiserver has yet to load it, so the webhook comes
// back into the path until a probe sees it.
func (h *handover) changed() {
	h.inForce.Store(false)
	h.seen.Store(0)
	h.enqueue(h.AdmissionReconciler.Key())
	h.enqueue(h.probeKey)
}

// bindingChanged is told of every event of the kind's Bindings: while the
// policy is not seen in force, a Binding that publishes its Spec may be
// the first to probe with.
func (h *handover) bindingChanged() {
	if !h.inForce.Load() && h.enqueue != nil {
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
	if _, err := h.pbindings.Get(h.policy); err != nil {
		return nil
	}
	res, ok, err := h.prober.probe(ctx)
	switch {
	case err != nil:
		h.logger.Info("probe of the admission path failed; the webhook stays in the path", zap.Error(err))
		return controller.NewRequeueAfter(probeRetry)
	case !ok:
		return nil // no Binding published: nothing to admit yet; one that publishes brings the key back
	case !res.policyApplied:
		h.seen.Store(0)
		return controller.NewRequeueAfter(probeInterval)
	case h.seen.Add(1) < probesInForce:
		return controller.NewRequeueAfter(probeInterval)
	}
	h.inForce.Store(true)
	h.logger.Info("admission policy seen in force: the webhook leaves the path", zap.String("policy", h.policy), zap.String("probedWith", res.binding))
	h.enqueue(h.AdmissionReconciler.Key())
	return nil
}

// notifying wraps objects so that changed is called when one is created
// or restored.
func notifying(objects []policy.Object, changed func()) []policy.Object {
	out := make([]policy.Object, len(objects))
	for i, o := range objects {
		out[i] = notifyingObject{Object: o, changed: changed}
	}
	return out
}

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
