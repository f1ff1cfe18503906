package controllerruntime

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bindkit/bindkit/test/fixturebinding"
	"github.com/bindkit/bindkit/wiring"
)

// newManager returns a Manager that is never started, so no API server is
// needed: Add builds everything without contacting one.
func newManager(t *testing.T) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// Add mounts the kind's admission on the Manager's webhook server, at its
// path, and registers bindkit's metrics in the registry given; a second
// Add with the same registry is refused, naming the option.
func TestAddMountsAdmissionAndMetrics(t *testing.T) {
	kind, err := fixturebinding.New(fixturebinding.Kind)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	mgr := newManager(t)
	if err := Add(mgr, Options{Kinds: []*wiring.Kind{kind}, SystemNamespace: "system", MetricsRegistry: reg}); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	mgr.GetWebhookServer().WebhookMux().ServeHTTP(w, httptest.NewRequest(http.MethodPost, kind.WebhookPath, strings.NewReader("{")))
	// bindkit's handler, not a 404: it refuses the malformed review.
	if w.Code != http.StatusBadRequest && w.Code != http.StatusUnsupportedMediaType {
		t.Errorf("POST %s: %d %s, want bindkit's refusal of a malformed review", kind.WebhookPath, w.Code, w.Body.String())
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) == 0 {
		t.Error("no bindkit metric in the registry given")
	}
	err = Add(newManager(t), Options{Kinds: []*wiring.Kind{kind}, SystemNamespace: "system", MetricsRegistry: reg})
	if err == nil || !strings.Contains(err.Error(), "Options.MetricsRegistry") {
		t.Errorf("second Add with the same registry: %v, want an error naming Options.MetricsRegistry", err)
	}
}

// Bad options are reported, every one, before anything is added.
func TestAddRefusesBadOptions(t *testing.T) {
	err := Add(newManager(t), Options{Workers: -1, SystemNamespace: "system"})
	for _, want := range []string{"bindkit:", "Options.Kinds is empty", "Options.Workers -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Add = %v, want an error containing %q", err, want)
		}
	}
}
