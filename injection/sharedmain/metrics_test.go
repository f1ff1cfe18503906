package sharedmain

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/test/scrape"
)

// TestMetricsEndpoint runs the process on fake clients and reads its
// metrics: served over HTTPS on --metrics-address to a token the fake
// kube-apiserver authorizes, with the reconciles of its controllers,
// leadership, work queues and the runtime's metrics, and refused to
// others; over plain HTTP to anyone with --metrics-secure=false; nothing
// served with the endpoint off; a registry handed in with
// WithMetricsRegistry used instead of the process's own.
func TestMetricsEndpoint(t *testing.T) {
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "settings"}}
	reviews := &fakeReviews{tokens: map[string]string{"reader-token": "reader", "stranger-token": "stranger"}, readers: map[string]bool{"reader": true}}

	t.Run("on", func(t *testing.T) {
		ctx, fakes, _ := fakeContext(t, Flags{DisableHA: true}, seed)
		reviews.install(fakes.Kube)
		var rec recorder
		p, _ := startProcess(t, ctx, recordingController(&rec))
		if p.metricsAddr == nil {
			t.Fatal("metrics are on by default, but nothing listens")
		}
		url := "https://" + p.metricsAddr.String() + MetricsPath
		for token, want := range map[string]int{"": 401, "made-up": 401, "stranger-token": 403} {
			if _, err := scrape.GetWithToken(t.Context(), url, token); scrape.Status(err) != want {
				t.Errorf("scrape with token %q: %v, want %d", token, err, want)
			}
		}
		if _, err := scrape.Get(t.Context(), "http://"+p.metricsAddr.String()+MetricsPath); scrape.Status(err) != http.StatusBadRequest {
			t.Errorf("scrape over plain HTTP: %v, want 400 (an HTTP request to an HTTPS server)", err)
		}
		var got scrape.Families
		poll(t, "the seeded ConfigMap's reconcile counted", func(ctx context.Context) (bool, error) {
			f, err := scrape.GetWithToken(ctx, url, "reader-token")
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

	t.Run("plain HTTP", func(t *testing.T) {
		ctx, _, logs := fakeContext(t, Flags{DisableHA: true, MetricsInsecure: true}, seed)
		p, _ := startProcess(t, ctx, recordingController(&recorder{}))
		f, err := scrape.Get(t.Context(), "http://"+p.metricsAddr.String()+MetricsPath)
		if err != nil || !f.Has("bindkit_leader", nil) {
			t.Errorf("scrape over plain HTTP without a token: %v, want the metrics", err)
		}
		if !strings.Contains(logs.String(), "--metrics-secure=false") {
			t.Errorf("no warning that metrics are served unauthenticated in:\n%s", logs.String())
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

// TestLimitListenerHoldsAtMostN: a third connection waits until one of
// the first two closes; closing the listener releases a waiting Accept.
func TestLimitListenerHoldsAtMostN(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 2)
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection accepted while two are open")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close gives back nothing more
	third := <-accepted
	third.Close()
	second.Close()
	ln.Close()
	if _, ok := <-accepted; ok {
		t.Error("Accept returned a connection after Close")
	}
}
