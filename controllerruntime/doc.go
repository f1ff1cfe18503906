// Package controllerruntime runs bindkit's Binding kinds inside a
// controller-runtime Manager, for operators built with kubebuilder: one
// call, from the same wiring.Kind a sharedmain process runs.
//
//	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
//	if err != nil { ... }
//	if err := bindkitcr.Add(mgr, bindkitcr.Options{Kinds: []*wiring.Kind{kind}}); err != nil { ... }
//	mgr.Start(ctrl.SetupSignalHandler())
//
// (The package's name is controller-runtime's own, so import it under
// another, such as bindkitcr.)
//
// What the Manager gives bindkit, and what bindkit keeps:
//
//   - Leader election is the Manager's. bindkit's controllers run their
//     workers on every replica, keeping the Bindings' caches and the
//     admission indexes warm, and write only while the Manager leads
//     (controller.Impl's Promote and Demote, from a leader-elected
//     Runnable). Without leader election they lead at once.
//   - Admission is served by the Manager's webhook server, with its TLS,
//     port and certificates (cert-manager's, or files in its CertDir);
//     bindkit's handler (webhook.NewHandler) still bounds every request
//     and contains panics. The admission controllers program each kind's
//     MutatingWebhookConfiguration as under sharedmain, taking the
//     caBundle from the certificate's Secret (Options.CertificatesSecret,
//     cert-manager's), so the configuration needs no cainjector
//     annotation; without that Secret they keep the caBundle installed.
//   - Clients and informers are bindkit's own (package injection), built
//     from the Manager's rest.Config with bindkit's rate limits: subjects
//     are cached as metadata only (duck's slim cache), whatever the
//     Manager caches for its other controllers.
//   - Metrics are bindkit's families (package metrics) in the Manager's
//     registry, served by its metrics server; logs go to the Manager's
//     logr.Logger; a readiness and a liveness check named "bindkit" join
//     the Manager's.
//   - Start-up is bounded: caches that cannot sync (a resource the
//     Manager's identity may not list) stop the Manager with an error at
//     Options.CacheSyncTimeout, the Manager's Controller.CacheSyncTimeout
//     by default, and never hold it past its context.
//   - Shutdown follows the Manager's order: the reconcilers drain while
//     the Manager still leads, then leadership goes, then the webhook
//     server stops.
//
// controller-runtime enters bindkit here only: this is a module of its own
// (github.com/bindkit/bindkit/controllerruntime), so the framework's
// dependencies stay client-go's. examples/githubbinding is a kubebuilder
// project that binds the GithubBinding kind this way, made by kubebuilder
// init and bindkit kubebuilder create binding (a module of its own; its
// tests are its make test's).
package controllerruntime
