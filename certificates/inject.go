package certificates

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
)

// InjectCABundle sets caBundle on every webhook of the named
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations. A
// configuration whose webhooks all carry bundle already is not updated, so
// calling it on every reconcile costs one GET per configuration. A missing
// configuration is an error, so a caller that creates it later retries.
func InjectCABundle(ctx context.Context, client admissionclient.AdmissionregistrationV1Interface, bundle []byte, mutating, validating []string) error {
	err := injectInto(ctx, "MutatingWebhookConfiguration", client.MutatingWebhookConfigurations(), mutating, bundle,
		func(c *admissionregistrationv1.MutatingWebhookConfiguration) (ccs []*admissionregistrationv1.WebhookClientConfig) {
			for i := range c.Webhooks {
				ccs = append(ccs, &c.Webhooks[i].ClientConfig)
			}
			return ccs
		})
	if err != nil {
		return err
	}
	return injectInto(ctx, "ValidatingWebhookConfiguration", client.ValidatingWebhookConfigurations(), validating, bundle,
		func(c *admissionregistrationv1.ValidatingWebhookConfiguration) (ccs []*admissionregistrationv1.WebhookClientConfig) {
			for i := range c.Webhooks {
				ccs = append(ccs, &c.Webhooks[i].ClientConfig)
			}
			return ccs
		})
}

// configClient is the part of a typed webhook-configuration client that
// InjectCABundle uses; both the mutating and the validating one fit it.
type configClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// injectInto sets bundle on the client configs of each named configuration
// of one kind, updating only those that change, retrying on conflict.
func injectInto[T any](ctx context.Context, kind string, client configClient[T], names []string, bundle []byte, clientConfigs func(T) []*admissionregistrationv1.WebhookClientConfig) error {
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			for _, cc := range clientConfigs(cfg) {
				if !bytes.Equal(cc.CABundle, bundle) {
					cc.CABundle = bundle
					changed = true
				}
			}
			if !changed {
				return nil
			}
			_, err = client.Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("%s %s: set caBundle: %w", kind, name, err)
		}
	}
	return nil
}
