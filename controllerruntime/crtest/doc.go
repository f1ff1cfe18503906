// Package crtest runs Binding kinds inside a controller-runtime Manager
// against a test's control plane: the envtest.Environment a kubebuilder
// project's suite_test.go starts (controller-runtime's envtest), or any
// rest.Config with the kinds' CRDs installed.
//
//	mgr, err := crtest.Start(ctx, cfg, crtest.Options{
//		Kinds:                 []*wiring.Kind{kind}, // as cmd/main.go wires it
//		WebhookConfigurations: []string{"../../config/bindkit/regionbinding_webhook.yaml"},
//	})
//	if err != nil { ... }
//	defer mgr.Stop()
//
// Start does what a cluster gives the Manager's pod, in the test's
// process:
//
//   - a system namespace (Options.SystemNamespace) holding the webhook's
//     certificate in the Secret cert-manager writes for kubebuilder's
//     config/certmanager (webhook-server-cert: ca.crt, tls.crt, tls.key),
//     the same certificate in a directory for the Manager's webhook
//     server, on 127.0.0.1;
//   - each kind's MutatingWebhookConfiguration, from the project's
//     config/ when named, pointed at that server by URL (as a Service
//     would route to the pod);
//   - the Manager, with bindkit added by controllerruntime.Add as
//     cmd/main.go adds it, its metrics in a registry of its own
//     (Manager.Registry), so that Managers can run side by side.
//
// It returns once bindkit's readiness check passes, the leader has
// published the certificate's CA as each configuration's caBundle (the
// kube-apiserver can call the webhook), and the kube-apiserver admits
// writes of the kinds' Bindings. Stop stops the Manager and deletes
// the configurations Start installed, so no webhook with failurePolicy
// Fail is left calling a closed port.
//
// BinaryAssetsDirectory tells controller-runtime's envtest where etcd and
// kube-apiserver are: $KUBEBUILDER_ASSETS, as a kubebuilder project's make
// test sets it, else where bindkit's envtest finds them.
//
// Start takes a context and returns errors rather than a testing.T, so
// Ginkgo specs (kubebuilder's suites) and plain tests use it alike.
package crtest
