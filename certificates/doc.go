// Package certificates generates the CA and the serving certificate of an
// admission webhook, keeps them in a Secret and rotates them in an order
// that never has the webhook present a certificate its clients do not
// trust.
//
// GenerateCA and GenerateServingCert make ECDSA P-256 keys and
// SHA-256 signatures. ServiceDNSNames lists the names under which a Service
// is reached inside a cluster.
//
// # The Secret
//
// Reconciler owns the Secret. Each Reconcile creates the Secret when it is
// missing, repairs missing or unparsable entries, keeps the CA key so the
// serving certificate is re-issued without changing the CA, rotates the
// serving certificate ServingRotateBefore its expiry and the CA
// CARotateBefore its expiry, and asks, through the EnqueueAfter callback, to
// run again when the next of these moments comes. It schedules its next
// run on every path: a failed run is tried again after RetryInterval
// whatever the work queue's own retry budget, so rotation never stops for
// good. Observe is the read-only variant a replica that does not lead
// runs; it reports a serving certificate that nobody renews (see Observe).
//
// Reconciler has no loop of its own: its Reconcile(ctx, key) error method
// matches a work-queue reconciler, so a controller (for example bindkit's
// controller.Impl, fed by a Secret informer filtered to the one Secret) wraps
// it, and EnqueueAfter is wired to that controller's delayed enqueue.
//
// # Trust comes first
//
// The clients of a webhook (the kube-apiservers) trust the CA bundle they
// read from the webhook configuration's caBundle. One piece of code writes
// it, the Publisher (bindkit's admission controller, for its own
// configuration), by copying the Secret's CA bundle. The webhook server
// presents whatever serving certificate the Secret holds, and keeps
// presenting its last good one while the Secret has none. So the order in
// which the Reconciler writes the Secret is the whole guarantee. Every CA
// change follows the same sequence:
//
//  1. The new CA is added to the bundle, in front of every older CA that is
//     still valid. Nothing is signed by it yet; the serving certificate
//     stays what it was (renewed one last time under the old CA, for a
//     scheduled CA rotation).
//  2. Each Publisher copies the new bundle into what its clients read.
//  3. Once every Publisher that publishes (WithPublishers) carries the new
//     CA, and has for TrustDelay (the time each kube-apiserver's own cache
//     of the configuration needs to catch up), the next serving certificate
//     that is due is signed by the new CA. While the Reconciler waits it
//     looks at the Publishers about once a second; they read a cache.
//  4. The old CA leaves the bundle only when it expires.
//
// A scheduled CA rotation starts CARotateBefore ahead of the CA's expiry
// and signs under the new CA at the next serving rotation. A lost CA (the
// Secret deleted, its CA key removed or corrupted) starts the same
// sequence at once; a serving certificate under the old CA that is still
// in the Secret keeps serving until its regular rotation, and one that is
// gone keeps serving from the webhook's memory. When the bundle itself is
// lost, the still-valid CAs the Publishers carry are taken back into it, so
// the certificate being served stays trusted through the switch; if the CA
// key survived, its CA is found among them and nothing changes. A
// Publisher that publishes nothing (its configuration is not installed, so
// no client calls the webhook through it) constrains nothing; without
// Publishers the Reconciler signs at once.
package certificates
