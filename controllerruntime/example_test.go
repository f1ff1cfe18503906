package controllerruntime_test

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bindkit/bindkit/controllerruntime"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/wiring"
)

// Add runs a Binding kind inside a controller-runtime Manager: its
// reconciler beside the Manager's controllers, its admission on the
// Manager's webhook server, its metrics in the Manager's registry. A
// kubebuilder project's cmd/main.go does this after ctrl.NewManager and
// before mgr.Start.
func ExampleAdd() {
	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// In a main: ctrl.GetConfigOrDie() and the project's options. Add
	// contacts no API server: that waits for mgr.Start.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = controllerruntime.Add(mgr, controllerruntime.Options{
		Kinds:           []*wiring.Kind{kind},
		SystemNamespace: "githubbinding-system",   // default: $SYSTEM_NAMESPACE
		MetricsRegistry: prometheus.NewRegistry(), // default: controller-runtime's registry
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("admission of", kind.GVK.Kind, "at", kind.WebhookPath)
	// Then mgr.Start(ctrl.SetupSignalHandler()) runs it all.

	// Output: admission of GithubBinding at /githubbindings
}
