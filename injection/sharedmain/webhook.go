package sharedmain

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/webhook"
)

// CertificatesControllerName names the controller that keeps the webhook's
// certificates Secret, in logs and among the Impls leader election moves.
const CertificatesControllerName = "certificates"

// admissionControllers returns the reconcilers of impls that are also
// admission controllers, in constructor order.
func admissionControllers(impls []*controller.Impl) []webhook.AdmissionController {
	var out []webhook.AdmissionController
	for _, impl := range impls {
		if ac, ok := impl.Reconciler().(webhook.AdmissionController); ok {
			out = append(out, ac)
		}
	}
	return out
}

// leaderCertificates lets only the leader write the certificates Secret.
//
// Every replica serves the webhook from the same Secret, through its
// informer, so one writer is enough; several would race on creation and
// could issue different CAs in turn while the webhook configuration's
// caBundle holds only one. On promotion the Secret's key is enqueued, so a
// new leader (and a single replica under --disable-ha, promoted at once)
// creates or repairs it without waiting for an event.
type leaderCertificates struct {
	controller.LeaderAwareFuncs
	certs *certificates.Reconciler
}

func (l *leaderCertificates) Reconcile(ctx context.Context, key string) error {
	if !l.IsLeader() {
		return nil
	}
	return l.certs.Reconcile(ctx, key)
}

// newWebhook builds the certificates controller for the webhook's Secret
// and the webhook server routing to admission. Both read the Secret through
// the system namespace's informer, which they request here and which
// therefore must start afterwards.
func newWebhook(ctx context.Context, namespace string, f Flags, logger *zap.Logger, admission []webhook.AdmissionController) (*controller.Impl, *webhook.Server, error) {
	opts := webhook.Options{
		Address:     f.WebhookAddress,
		Port:        f.WebhookPort,
		GracePeriod: f.WebhookGracePeriod,
		Logger:      logger.Named("webhook"),
	}
	secrets := injection.NamespacedKubeInformerFactory(ctx, namespace).Core().V1().Secrets()

	certOpts := opts.CertificateOptions(namespace)
	certOpts.IPAddresses = f.WebhookIPSANs
	// MutatingWebhookConfigurations stay empty: each psbinding admission
	// controller writes the caBundle of its own configuration.
	lc := &leaderCertificates{}
	impl := controller.NewImpl(lc, logger, CertificatesControllerName)
	certs, err := certificates.NewReconciler(injection.KubeClient(ctx), certOpts,
		certificates.WithLister(secrets.Lister()),
		certificates.WithEnqueueAfter(impl.EnqueueKeyAfter),
		certificates.WithLogger(logger.Named(CertificatesControllerName)))
	if err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: %w", err)
	}
	lc.certs = certs
	lc.PromoteFunc = func(enqueue func(string)) { enqueue(certs.Key()) }
	if _, err := secrets.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: controller.FilterWithName(certOpts.SecretName),
		Handler:    controller.HandleAll(impl.Enqueue),
	}); err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: secret %s/%s: watch: %w", namespace, certOpts.SecretName, err)
	}

	srv, err := webhook.New(opts, secrets.Lister().Secrets(namespace), admission...)
	if err != nil {
		return nil, nil, err
	}
	return impl, srv, nil
}
