package certificates

import (
	"bytes"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
)

// InjectCABundle sets caBundle on every webhook of the named
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations. A
// configuration whose webhooks all carry bundle already is not updated, so
// calling it on every reconcile costs one GET per configuration. A missing
// configuration is an error, so a caller that creates it later retries.
func InjectCABundle(ctx context.Context, client admissionregistrationv1.AdmissionregistrationV1Interface, bundle []byte, mutating, validating []string) error {
	for _, name := range mutating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := client.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			for i := range cfg.Webhooks {
				if cc := &cfg.Webhooks[i].ClientConfig; !bytes.Equal(cc.CABundle, bundle) {
					cc.CABundle = bundle
					changed = true
				}
			}
			if !changed {
				return nil
			}
			_, err = client.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("MutatingWebhookConfiguration %s: set caBundle: %w", name, err)
		}
	}
	for _, name := range validating {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := client.ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			for i := range cfg.Webhooks {
				if cc := &cfg.Webhooks[i].ClientConfig; !bytes.Equal(cc.CABundle, bundle) {
					cc.CABundle = bundle
					changed = true
				}
			}
			if !changed {
				return nil
			}
			_, err = client.ValidatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("ValidatingWebhookConfiguration %s: set caBundle: %w", name, err)
		}
	}
	return nil
}
