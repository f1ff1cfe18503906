package wiring

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

// A declarative kind's webhook leaves the kube-apiserver's path as its
// process shuts down (webhook.PathLeaver), so that no create is refused
// while no process serves the webhook: between a process that stops and
// the next that starts, whatever their admission path, the kind's
// MutatingAdmissionPolicy admits, with no process. Admitting by policy,
// the webhook is out of the path already; admitting by webhook, the
// leader hands the kind to the policy first, as a process admitting by
// policy takes over at its start: the policy is seen in force before the
// webhook's rules are emptied. The next process takes the kind back as at
// any start (a process admitting by webhook retires the policy once its
// webhook is seen in the path). The webhook server then drains at once
// rather than at the end of its grace period.

var (
	_ webhook.PathLeaver = (*handover)(nil)
	_ webhook.PathLeaver = (*retiringAdmission)(nil)
	_ webhook.PathLeaver = (*withGuard)(nil)
)

// LeavePath implements webhook.PathLeaver: admitting by policy, the
// webhook is out of the path once the policy is in force and its rules
// are emptied; it says so once probes through the kube-apiserver do not
// reach it (leftPath). A replica that does not lead writes nothing
// either way.
func (h *handover) LeavePath(ctx context.Context) bool {
	return leftPath(ctx, h.AdmissionReconciler, h.prober)
}

// LeavePath implements webhook.PathLeaver: admitting by webhook, the
// leader hands the kind to the policy (handToPolicy) and then takes the
// webhook out of the path. A replica that does not lead, or a kind the
// policy cannot admit (an older kube-apiserver, custom shapes), stays: its
// webhook keeps its grace period.
func (r *retiringAdmission) LeavePath(ctx context.Context) bool {
	if r.shutdown == nil || r.prober == nil || !r.IsLeader() {
		return false
	}
	if err := r.handToPolicy(ctx); err != nil {
		r.logger.Info("shutting down: the admission policy is not seen in force; the webhook stays in the path for its grace period", zap.Error(err))
		return false
	}
	r.leaving.Store(true)
	if err := r.AdmissionReconciler.Reconcile(ctx, r.Key()); err != nil {
		r.logger.Info("shutting down: the webhook's rules could not be emptied; it stays in the path for its grace period", zap.Error(err))
		return false
	}
	if !leftPath(ctx, r.AdmissionReconciler, r.prober) {
		return false
	}
	r.logger.Info("shutting down: the admission policy admits the kind until the next process starts", zap.String("policy", r.policyName))
	return true
}

// handToPolicy programs the kind's policy and its bindings (one per
// Binding) and probes until each published Binding is seen applied by
// it, probesInForce times in a row, or ctx ends.
func (r *retiringAdmission) handToPolicy(ctx context.Context) error {
	refs, err := bindingRefs(r.list)
	if err != nil {
		return err
	}
	if err := programPolicy(ctx, r.kube, *r.shutdown, refs); err != nil {
		return err
	}
	// The retiring at the next start removes it again once its webhook is
	// in the path; this process's own retiring is done.
	r.retired.Store(true)
	for seen := 0; seen < probesInForce; {
		res, probed, err := r.prober.probeEach(ctx, func(psbinding.Bindable) bool { return true })
		switch {
		case err == nil && probed == 0:
			return nil // nothing published: nothing the policy could admit
		case err == nil && res.policyApplied:
			seen++
		default:
			seen = 0
		}
		if err := sleep(ctx, probeInterval); err != nil {
			return fmt.Errorf("admission policy %s not seen in force: %w", r.policyName, err)
		}
	}
	return nil
}

// leftPath waits until the kube-apiserver no longer calls ac's webhook:
// its configuration has no rules, as the process's informer has it, and
// probesInForce probes in a row, probeInterval apart, do not reach it (or
// no Binding can be probed with, which leaves the configuration's word).
// It reports false when ctx ends first.
func leftPath(ctx context.Context, ac *psbinding.AdmissionReconciler, p *prober) bool {
	if p == nil {
		return false
	}
	for seen := 0; ; {
		_, inPath, err := ac.PublishedCABundle()
		if err == nil && !inPath {
			res, ok, err := p.probe(ctx)
			switch {
			case err == nil && !ok:
				return true
			case err == nil && !res.webhookCalled:
				seen++
			default:
				seen = 0
			}
		} else {
			seen = 0
		}
		if seen >= probesInForce {
			return true
		}
		if sleep(ctx, probeInterval) != nil {
			return false
		}
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// programPolicy creates opts' policy and the binding of each of refs, or
// gives back the spec of one that differs: what the handover's Reconciler
// keeps programmed, written once, without its informers (a process
// admitting by webhook watches none of them).
func programPolicy(ctx context.Context, kube kubernetes.Interface, opts policy.MutatingPolicyOptions, refs []policy.BindingRef) error {
	api := kube.AdmissionregistrationV1()
	m, err := policy.MutatingPolicy(opts)
	if err != nil {
		return err
	}
	err = createOrUpdate(ctx, m.Name, m, api.MutatingAdmissionPolicies().Create, api.MutatingAdmissionPolicies().Get, api.MutatingAdmissionPolicies().Update,
		func(dst, src *admissionregistrationv1.MutatingAdmissionPolicy) bool {
			same := reflect.DeepEqual(dst.Spec, src.Spec)
			dst.Spec = src.Spec
			return !same
		})
	if err != nil {
		return fmt.Errorf("MutatingAdmissionPolicy %s: %w", m.Name, err)
	}
	for _, ref := range refs {
		pb, err := policy.MutatingPolicyBinding(opts, ref)
		if err != nil {
			continue // the reconciler's, as on the policy's path
		}
		err = createOrUpdate(ctx, pb.Name, pb, api.MutatingAdmissionPolicyBindings().Create, api.MutatingAdmissionPolicyBindings().Get, api.MutatingAdmissionPolicyBindings().Update,
			func(dst, src *admissionregistrationv1.MutatingAdmissionPolicyBinding) bool {
				same := reflect.DeepEqual(dst.Spec, src.Spec)
				dst.Spec = src.Spec
				for k, v := range src.Labels {
					same = same && dst.Labels[k] == v
					if dst.Labels == nil {
						dst.Labels = map[string]string{}
					}
					dst.Labels[k] = v
				}
				return !same
			})
		if err != nil {
			return fmt.Errorf("MutatingAdmissionPolicyBinding %s: %w", pb.Name, err)
		}
	}
	return nil
}

// createOrUpdate creates desired, or, when it exists, updates it with
// what merge (which reports a change) takes from desired.
func createOrUpdate[T any](ctx context.Context, name string, desired *T,
	create func(context.Context, *T, metav1.CreateOptions) (*T, error),
	get func(context.Context, string, metav1.GetOptions) (*T, error),
	update func(context.Context, *T, metav1.UpdateOptions) (*T, error),
	merge func(dst, src *T) bool,
) error {
	_, err := create(ctx, desired, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur, err := get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if merge(cur, desired) {
		_, err = update(ctx, cur, metav1.UpdateOptions{})
	}
	return err
}

// policyCanAdmit reports whether the kind's MutatingAdmissionPolicy can
// admit its subjects in the process ctx describes: the kube-apiserver
// serves it, and the kind binds no custom shapes.
func (b *Kind) policyCanAdmit(ctx context.Context, opts Options) bool {
	if !reflect.ValueOf(opts.Shapes).IsZero() {
		return false
	}
	served, err := policy.MutatingPoliciesServed(injection.KubeClient(ctx).Discovery())
	return err == nil && served
}
