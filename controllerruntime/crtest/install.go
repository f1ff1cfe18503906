package crtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/bindingtest"
	bindkitcr "github.com/bindkit/bindkit/controllerruntime"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/wiring"
)

// installSystem creates the system namespace when missing, a certificate
// for 127.0.0.1, its files in a directory for the webhook server, and the
// Secret cert-manager would write (replacing one there).
func (m *Manager) installSystem(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.SystemNamespace}}
	if _, err := m.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("crtest: create namespace %s: %w", m.SystemNamespace, err)
	}
	cert, err := envtest.NewServingCert("127.0.0.1")
	if err != nil {
		return fmt.Errorf("crtest: certificate: %w", err)
	}
	m.CAPEM = cert.CAPEM
	if m.certDir, err = os.MkdirTemp("", "crtest-certs-"); err != nil {
		return fmt.Errorf("crtest: %w", err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM} {
		if err := os.WriteFile(filepath.Join(m.certDir, name), data, 0o600); err != nil {
			return fmt.Errorf("crtest: %w", err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.SystemNamespace, Name: bindkitcr.DefaultCertificatesSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{bindkitcr.DefaultCAKey: cert.CAPEM, "tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM},
	}
	secrets := m.kube.CoreV1().Secrets(m.SystemNamespace)
	err = secrets.Delete(ctx, secret.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("crtest: replace Secret %s/%s: %w", m.SystemNamespace, secret.Name, err)
	}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("crtest: create Secret %s/%s: %w", m.SystemNamespace, secret.Name, err)
	}
	return nil
}

// installWebhookConfigurations creates (or points, when one is there)
// each kind's webhook configuration at the Manager's webhook server.
func (m *Manager) installWebhookConfigurations(ctx context.Context, kinds []*wiring.Kind, files []string) error {
	fromFiles := map[string]*admissionregistrationv1.MutatingWebhookConfiguration{}
	for _, path := range files {
		configs, err := bindingtest.ReadWebhookConfigurations(path)
		if err != nil {
			return err
		}
		for _, c := range configs {
			fromFiles[c.Name] = c
		}
	}
	api := m.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, k := range kinds {
		url := fmt.Sprintf("https://127.0.0.1:%d%s", m.WebhookPort, k.WebhookPath)
		cfg, ok := fromFiles[k.WebhookConfigurationName]
		if !ok && len(files) > 0 {
			return fmt.Errorf("crtest: no MutatingWebhookConfiguration %s (kind %s) in %s", k.WebhookConfigurationName, k.GVK.Kind, strings.Join(files, ", "))
		}
		if !ok {
			cfg = &admissionregistrationv1.MutatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: k.WebhookConfigurationName},
				Webhooks: []admissionregistrationv1.MutatingWebhook{{
					Name:                    k.WebhookName,
					FailurePolicy:           new(admissionregistrationv1.Fail),
					SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
					AdmissionReviewVersions: []string{"v1"},
					TimeoutSeconds:          new(int32(10)),
				}},
			}
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
		}
		_, err := api.Create(ctx, cfg, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current, err := api.Get(ctx, cfg.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for i := range current.Webhooks {
					current.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
				}
				_, err = api.Update(ctx, current, metav1.UpdateOptions{})
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("crtest: install MutatingWebhookConfiguration %s: %w", cfg.Name, err)
		}
		m.installed = append(m.installed, cfg.Name)
	}
	return nil
}

// uninstall deletes the webhook configurations Start installed.
func (m *Manager) uninstall() error {
	var errs []error
	api := m.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, name := range m.installed {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := api.Delete(ctx, name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("crtest: delete MutatingWebhookConfiguration %s: %w", name, err))
		}
	}
	m.installed = nil
	return errors.Join(errs...)
}

// waitReady waits until the Manager is ready and every kind's webhook
// configuration carries the CA, or the Manager stops, or ctx ends.
func (m *Manager) waitReady(ctx context.Context, kinds []*wiring.Kind) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-m.done:
			m.done <- err // for Stop
			return false, fmt.Errorf("the Manager stopped: %v", err)
		default:
		}
		if last = m.Ready(); last != nil {
			return false, nil
		}
		for _, k := range kinds {
			cfg, err := m.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, k.WebhookConfigurationName, metav1.GetOptions{})
			if err != nil {
				last = err
				return false, nil
			}
			for _, w := range cfg.Webhooks {
				if !bytes.Contains(w.ClientConfig.CABundle, bytes.TrimSpace(m.CAPEM)) {
					last = fmt.Errorf("MutatingWebhookConfiguration %s: webhook %s has no caBundle with the Manager's CA yet", cfg.Name, w.Name)
					return false, nil
				}
			}
			if last = m.writable(ctx, k); last != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// writable returns nil once the kube-apiserver admits a write of kind's
// Bindings: the admission policies bindkit programs on them (the
// requested-by record, a MutatingAdmissionPolicy) answer 503 for a
// moment after they are created, while the kube-apiserver maps their
// kind. It dry-runs the create of an empty Binding: any answer but 503
// (its schema refusing it, say) has passed mutating admission.
func (m *Manager) writable(ctx context.Context, k *wiring.Kind) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k.GVK.GroupVersion().String(),
		"kind":       k.GVK.Kind,
		"metadata":   map[string]any{"generateName": "crtest-probe-"},
	}}
	_, err := m.dyn.Resource(k.GVR).Namespace(m.SystemNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if apierrors.IsServiceUnavailable(err) {
		return fmt.Errorf("a %s is not writable yet: %w", k.GVK.Kind, err)
	}
	return nil
}
