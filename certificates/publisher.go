package certificates

import (
	"crypto/x509"
	"slices"
)

// Publisher hands the CA bundle to the clients of the webhook: for an
// admission webhook, the caBundle of its webhook configuration, from which
// the kube-apiserver learns whom to trust. bindkit's admission controllers
// (psbinding.AdmissionReconciler) are Publishers of their
// MutatingWebhookConfiguration, and the only code that writes caBundle.
//
// The contract the Reconciler relies on:
//
//   - PublishedCABundle reports what the clients trust now: the PEM bundle
//     as stored in the object they read, not what the Publisher is about to
//     write. It reads a cache (an informer's lister), since the Reconciler
//     calls it on every run and, while it waits for a new CA to be
//     published, about once a second.
//   - published is false when no client calls the webhook through this
//     Publisher (its configuration is not installed, or holds no webhook of
//     ours): such a Publisher constrains nothing.
//   - A Publisher copies the Secret's whole CA bundle, as the Reconciler
//     wrote it, into what it publishes, and never drops a CA the Secret
//     still holds.
//   - String names the Publisher in logs and errors, e.g.
//     "MutatingWebhookConfiguration githubbindings.webhook.bindkit.dev".
type Publisher interface {
	PublishedCABundle() (bundle []byte, published bool, err error)
	String() string
}

// published is what one Publisher published, parsed.
type published struct {
	name  string
	certs []*x509.Certificate
	// err is why the published bundle does not parse; such a bundle
	// trusts nothing.
	err error
}

// trusts reports whether ca is among the published certificates.
func (p published) trusts(ca *x509.Certificate) bool {
	return slices.ContainsFunc(p.certs, ca.Equal)
}
