package sharedmain

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/test/scrape"
)

// TestMetricsEndpoint runs the process on fake clients and reads its
// metrics: served over HTTP on --metrics-address with the reconciles of
// its controllers, leadership, work queues and the runtime's metrics;
// nothing served with the endpoint off; a registry handed in with
// WithMetricsRegistry used instead of the process's own.
func TestMetricsEndpoint(t *testing.T) {
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "settings"}}

	t.Run("on", func(t *testing.T) {
		ctx, _, _ := fakeContext(t, Flags{DisableHA: true}, seed)
		var rec recorder
		p, _ := startProcess(t, ctx, recordingController(&rec))
		if p.metricsAddr == nil {
			t.Fatal("metrics are on by default, but nothing listens")
		}
		url := "http://" + p.metricsAddr.String() + MetricsPath
		var got scrape.Families
		poll(t, "the seeded ConfigMap's reconcile counted", func(ctx context.Context) (bool, error) {
			f, err := scrape.Get(ctx, url)
			got = f
			return err == nil && f.Sum("bindkit_reconcile_total", map[string]string{"controller": "recorder", "outcome": "success"}) >= 1, nil
		})
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"bindkit_leader", map[string]string{"controller": "recorder"}, 1},
			{"bindkit_workqueue_depth", map[string]string{"controller": "recorder"}, 0},
		} {
			if v := got.Sum(c.name, c.labels); v != c.want || !got.Has(c.name, c.labels) {
				t.Errorf("%s%v = %g, want %g", c.name, c.labels, v, c.want)
			}
		}
		for _, name := range []string{"bindkit_reconcile_duration_seconds", "bindkit_workqueue_adds_total", "go_goroutines", "process_resident_memory_bytes"} {
			if !got.Has(name, nil) {
				t.Errorf("no %s in the scrape", name)
			}
		}
	})

	t.Run("off", func(t *testing.T) {
		ctx, _, _ := fakeContext(t, Flags{DisableHA: true, MetricsAddress: MetricsOff}, seed)
		p, _ := startProcess(t, ctx, recordingController(&recorder{}))
		if p.metricsAddr != nil {
			t.Errorf("--metrics-address off, yet metrics are served at %s", p.metricsAddr)
		}
	})

	t.Run("registry from the context", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		ctx, _, _ := fakeContext(t, Flags{DisableHA: true, MetricsAddress: MetricsOff}, seed)
		var rec recorder
		startProcess(t, WithMetricsRegistry(ctx, reg), recordingController(&rec))
		poll(t, "the reconcile counted in the given registry", func(context.Context) (bool, error) {
			mfs, err := reg.Gather()
			if err != nil {
				return false, err
			}
			for _, mf := range mfs {
				if mf.GetName() == "bindkit_reconcile_total" && len(mf.GetMetric()) > 0 {
					return true, nil
				}
			}
			return false, nil
		})
		// A registry serves one process: a second one with it fails.
		ctx2, _, _ := fakeContext(t, Flags{DisableHA: true}, seed)
		if err := Run(WithMetricsRegistry(ctx2, reg), "second", recordingController(&recorder{})); err == nil {
			t.Error("a second Run with the same registry started")
		}
	})
}
