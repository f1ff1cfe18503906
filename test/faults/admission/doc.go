// Package admission breaks what the webhook's admission path depends on
// while the githubbinding controller binary runs as users run it: the
// certificates Secret (deleted, its CA key removed) during a burst of
// creates, and the MutatingWebhookConfiguration (edited, deleted and
// re-applied from config/); and shows that the webhook is called only in
// the namespaces where Bindings apply. Its tests are the package's
// external tests, on the harness of package faults.
package admission
