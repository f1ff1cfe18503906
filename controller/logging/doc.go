// Package logging carries a *zap.Logger in a context.Context.
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
