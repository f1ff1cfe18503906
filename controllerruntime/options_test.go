package controllerruntime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

func testKind(t *testing.T) *wiring.Kind {
	t.Helper()
	return &wiring.Kind{ControllerName: "envbindings", Controller: func(_ context.Context, _ configmap.Watcher) *controller.Impl { return nil },
		Webhook: func(_ context.Context, _ configmap.Watcher) *controller.Impl { return nil }}
}

func TestOptionsDefaults(t *testing.T) {
	t.Setenv("SYSTEM_NAMESPACE", "from-env")
	kind := testKind(t)
	got, err := Options{Kinds: []*wiring.Kind{kind}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		Kinds:              []*wiring.Kind{kind},
		Component:          "envbindings-controller",
		SystemNamespace:    "from-env",
		CertificatesSecret: DefaultCertificatesSecret,
		CAKey:              DefaultCAKey,
		Workers:            sharedmain.WorkersPerController,
		KubeAPIQPS:         sharedmain.DefaultKubeAPIQPS,
		KubeAPIBurst:       sharedmain.DefaultKubeAPIBurst,
		ResyncPeriod:       sharedmain.DefaultResyncPeriod,
		CacheSyncTimeout:   sharedmain.CacheSyncTimeout,
	}
	if got.MetricsRegistry == nil {
		t.Error("MetricsRegistry: no default")
	}
	got.MetricsRegistry = nil
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b *wiring.Kind) bool { return a == b })); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestOptionsRefused(t *testing.T) {
	t.Setenv("SYSTEM_NAMESPACE", "")
	kinds := []*wiring.Kind{testKind(t)}
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"no kind", Options{SystemNamespace: "ns"}, []string{"Options.Kinds is empty"}},
		{"a nil kind", Options{Kinds: []*wiring.Kind{nil}, SystemNamespace: "ns"}, []string{"Options.Kinds[0]"}},
		{"a nil constructor", Options{Kinds: kinds, Controllers: []sharedmain.Constructor{nil}, SystemNamespace: "ns"}, []string{"Options.Controllers[0] is nil"}},
		{"no namespace", Options{Kinds: kinds}, []string{"Options.SystemNamespace is empty and $SYSTEM_NAMESPACE is unset"}},
		{"a bad namespace", Options{Kinds: kinds, SystemNamespace: "Not_A_Namespace"}, []string{`Options.SystemNamespace "Not_A_Namespace"`}},
		{"a bad Secret", Options{Kinds: kinds, SystemNamespace: "ns", CertificatesSecret: "no/slash"}, []string{`Options.CertificatesSecret "no/slash"`}},
		{"a bad component", Options{Kinds: kinds, SystemNamespace: "ns", Component: "two words"}, []string{`Options.Component "two words"`}},
		{"negatives", Options{Kinds: kinds, SystemNamespace: "ns", Workers: -1, KubeAPIBurst: -2, ResyncPeriod: -time.Second, CacheSyncTimeout: -time.Second},
			[]string{"Options.Workers -1", "Options.KubeAPIBurst -2", "Options.ResyncPeriod", "Options.CacheSyncTimeout"}},
		{"the listener's settings", Options{Kinds: kinds, SystemNamespace: "ns", Webhook: webhook.Options{Port: 9443, ClientCAFile: "/ca.pem", SecretName: "s", MaxConnections: 3}},
			[]string{"Options.Webhook.Port", "Options.Webhook.ClientCAFile", "Options.Webhook.SecretName", "Options.Webhook.MaxConnections"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.opts.withDefaults()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// The bounds of webhook.Options stay the caller's: Add passes them on.
func TestOptionsKeepAdmissionBounds(t *testing.T) {
	opts := Options{Kinds: []*wiring.Kind{testKind(t)}, SystemNamespace: "ns", MetricsRegistry: prometheus.NewRegistry(),
		Webhook: webhook.Options{MaxAdmissionsInFlight: 7, CallInKubeNamespaces: true}}
	got, err := opts.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Webhook.MaxAdmissionsInFlight != 7 || !got.Webhook.CallInKubeNamespaces {
		t.Errorf("Webhook = %+v, want the caller's bounds", got.Webhook)
	}
}
