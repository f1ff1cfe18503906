// Package certificates generates the CA and the serving certificate of an
// admission webhook, keeps them in a Secret and rotates them.
//
// GenerateCA and GenerateServingCert make ECDSA P-256 keys and
// SHA-256 signatures. ServiceDNSNames lists the names under which a Service
// is reached inside a cluster.
//
// Reconciler owns the Secret. Each Reconcile creates the Secret when it is
// missing, repairs missing or unparsable entries, keeps the CA key so the
// serving certificate is re-issued without changing the CA, rotates the
// serving certificate ServingRotateBefore its expiry and the CA
// CARotateBefore its expiry, and asks, through the EnqueueAfter callback, to
// run again exactly when the next of these moments comes. During a CA
// rotation the CA bundle (the CACert entry) holds the new and the old CA
// until the old one expires, and the serving certificate is renewed one last
// time under the old CA, so clients have a full serving validity (minus
// ServingRotateBefore) to learn the new bundle before anything is signed by
// the new CA.
//
// Reconciler has no loop of its own: its Reconcile(ctx, key) error method
// matches a work-queue reconciler, so a controller (for example bindkit's
// controller.Impl, fed by a Secret informer filtered to the one Secret) wraps
// it, and EnqueueAfter is wired to that controller's delayed enqueue.
//
// InjectCABundle writes the CA bundle into named Mutating- and
// ValidatingWebhookConfigurations; the Reconciler calls it after every
// reconcile when it is given their names.
package certificates
