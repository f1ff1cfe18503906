package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/controller"
)

// DefaultSettle is how long WebhookOff waits, after the policy's binding
// exists, before it takes the webhook out of the path: the kube-apiserver
// loads policies through an informer and compiles them, and until it has,
// only the webhook admits.
const DefaultSettle = 3 * time.Second

// WebhookKeyPrefix prefixes the key of a WebhookOff in a Reconciler, whose
// keys are names: the configuration's name may equal the policy's.
const WebhookKeyPrefix = "webhook/"

// Disabled is the Action of a WebhookOff that emptied its webhook's rules.
const Disabled Action = "disabled"

// WebhookOff is an Object that keeps a declarative kind's webhook out of
// the admission path once the kind's MutatingAdmissionPolicy admits its
// subjects: it empties the rules of one webhook of a
// MutatingWebhookConfiguration, keeping the rest (as an uninstall does),
// so the kube-apiserver no longer calls it, and a process admitting by
// policy needs no webhook server. It does so only once the policy's
// binding has existed for Settle, so that no subject is created while
// neither admits it; before that, Ensure asks to be called again when the
// binding has settled. A configuration that is not installed is left
// alone.
type WebhookOff struct {
	// Configuration and Webhook name the webhook.
	Configuration, Webhook string
	// Configurations reads the configuration, from a cache.
	Configurations Getter[*admissionregistrationv1.MutatingWebhookConfiguration]
	// Kube writes it.
	Kube kubernetes.Interface
	// PolicyBinding is the MutatingAdmissionPolicyBinding that must be in
	// force first, read through PolicyBindings.
	PolicyBinding  string
	PolicyBindings Getter[*admissionregistrationv1.MutatingAdmissionPolicyBinding]
	// Settle defaults to DefaultSettle.
	Settle time.Duration
	// FieldManager is sent with the write.
	FieldManager string
	// Now defaults to time.Now.
	Now func() time.Time
}

// Name implements Object.
func (w *WebhookOff) Name() string { return WebhookKeyPrefix + w.Configuration }

// Ensure implements Object.
func (w *WebhookOff) Ensure(ctx context.Context) (Action, error) {
	b, err := w.PolicyBindings(w.PolicyBinding)
	if apierrors.IsNotFound(err) {
		return Unchanged, nil // its creation brings the key back
	}
	if err != nil {
		return Unchanged, fmt.Errorf("MutatingAdmissionPolicyBinding %s: get: %w", w.PolicyBinding, err)
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	settle := w.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	if wait := b.CreationTimestamp.Add(settle).Sub(now()); wait > 0 {
		return Unchanged, controller.NewRequeueAfter(wait)
	}
	cfg, err := w.Configurations(w.Configuration)
	if apierrors.IsNotFound(err) {
		return Unchanged, nil
	}
	if err != nil {
		return Unchanged, fmt.Errorf("MutatingWebhookConfiguration %s: get: %w", w.Configuration, err)
	}
	i := slices.IndexFunc(cfg.Webhooks, func(wh admissionregistrationv1.MutatingWebhook) bool { return wh.Name == w.Webhook })
	if i < 0 || len(cfg.Webhooks[i].Rules) == 0 {
		return Unchanged, nil
	}
	off := cfg.DeepCopy()
	off.Webhooks[i].Rules = nil
	if _, err := w.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, off, metav1.UpdateOptions{FieldManager: w.FieldManager}); err != nil {
		if apierrors.IsConflict(err) {
			return Unchanged, nil // the informer's update event brings the key back
		}
		return Unchanged, fmt.Errorf("MutatingWebhookConfiguration %s: empty the rules of webhook %s: %w", w.Configuration, w.Webhook, err)
	}
	return Disabled, nil
}

// RemoveMutatingPolicy deletes the MutatingAdmissionPolicyBinding and then
// the MutatingAdmissionPolicy named name, when they exist: what a process
// admitting a kind by webhook does, once its webhook is programmed, with
// what an earlier process admitting it by policy left. Until then both
// admit a subject, which binds it once: the derived Do and the policy set
// entries by name.
func RemoveMutatingPolicy(ctx context.Context, kube kubernetes.Interface, name string) (removed bool, err error) {
	api := kube.AdmissionregistrationV1()
	var errs []error
	for _, del := range []struct {
		kind string
		f    func() error
	}{
		{"MutatingAdmissionPolicyBinding", func() error {
			return api.MutatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
		}},
		{"MutatingAdmissionPolicy", func() error { return api.MutatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}) }},
	} {
		switch err := del.f(); {
		case err == nil:
			removed = true
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("%s %s: delete: %w", del.kind, name, err))
		}
	}
	return removed, errors.Join(errs...)
}
