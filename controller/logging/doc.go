// Package logging carries a *zap.Logger in a context.Context. Code far
// from the process's main logs with the names of the controller, the key
// and the reconcile it runs in, without a logger passed down by hand.
//
// controller.Impl puts a logger that already names the controller, the key
// and the reconcile ID into the context it passes to Reconcile; code below a
// reconciler (clients, patch helpers, the webhook) takes it back out with
// FromContext, so every line it writes can be tied to one reconcile attempt
// without threading a logger through each call.
//
// The package is tiny and depends only on zap so that packages which must
// not import controller can still share the convention.
package logging
