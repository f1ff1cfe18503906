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
// creates or repairs it without waiting for an event. A follower runs the
// read-only certificates.Reconciler.Observe instead, which reports a
// serving certificate no leader renews before it expires.
type leaderCertificates struct {
	controller.LeaderAwareFuncs
	certs *certificates.Reconciler
}

func (l *leaderCertificates) Reconcile(ctx context.Context, key string) error {
	if !l.IsLeader() {
		return l.certs.Observe(ctx, key)
	}
	return l.certs.Reconcile(ctx, key)
}

// withWebhookOptions returns ctx carrying the one description of the
// webhook (webhook.WithOptions) that the server, the certificates
// reconciler and every admission controller of the process read: the
// Secret, its keys, the Service, and where the webhook may be called. It
// must be stored before the controller constructors run.
func withWebhookOptions(ctx context.Context, f Flags, logger *zap.Logger) context.Context {
	return webhook.WithOptions(ctx, webhook.Options{
		Address:              f.WebhookAddress,
		Port:                 f.WebhookPort,
		GracePeriod:          f.WebhookGracePeriod,
		CallInKubeNamespaces: f.WebhookKubeNamespaces,
		Logger:               logger.Named("webhook"),
	})
}

// newWebhook builds the certificates controller for the webhook's Secret
// and the webhook server routing to admission, both from the options in
// ctx (withWebhookOptions). Both read the Secret through the system
// namespace's informer, which they request here and which therefore must
// start afterwards. The admission controllers that publish the CA bundle
// (certificates.Publisher) are the ones the certificates reconciler waits
// for before it signs under a new CA.
func newWebhook(ctx context.Context, namespace string, f Flags, logger *zap.Logger, admission []webhook.AdmissionController) (*controller.Impl, *webhook.Server, error) {
	if err := f.validateCertificates(); err != nil {
		return nil, nil, fmt.Errorf("webhook certificates: %w", err)
	}
	opts := webhook.GetOptions(ctx)
	secrets := injection.NamespacedKubeInformerFactory(ctx, namespace).Core().V1().Secrets()

	certOpts := opts.CertificateOptions(namespace)
	certOpts.IPAddresses = f.WebhookIPSANs
	certOpts.CAValidity, certOpts.CARotateBefore = f.WebhookCAValidity, f.WebhookCARotateBefore
	certOpts.ServingValidity, certOpts.ServingRotateBefore = f.WebhookCertValidity, f.WebhookCertRotateBefore
	var publishers []certificates.Publisher
	for _, ac := range admission {
		if p, ok := ac.(certificates.Publisher); ok {
			publishers = append(publishers, p)
		}
	}
	lc := &leaderCertificates{}
	impl := controller.NewImpl(lc, logger, CertificatesControllerName)
	certs, err := certificates.NewReconciler(injection.KubeClient(ctx), certOpts,
		certificates.WithLister(secrets.Lister()),
		certificates.WithEnqueueAfter(impl.EnqueueKeyAfter),
		certificates.WithPublishers(publishers...),
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
