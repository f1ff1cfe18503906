package sharedmain

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/metrics"
	"github.com/bindkit/bindkit/test/fixtures"
)

// BenchmarkPatchBurstWithRealAPIServer sends the writes of a large
// rebinding, n PATCHes of a realistic Deployment's pod template 8 at a
// time (psbinding's patch concurrency), through
// a client built as the process builds its clients, once with the default
// limits and once with client-side throttling off. Equal times show that
// the defaults leave such a burst alone. n=10000 runs only with
// BINDKIT_BENCH_LARGE=1.
//
//	flock /tmp/bindkit-controlplane.lock go test -run '^$' -bench PatchBurst -benchtime 3x ./injection/sharedmain/
func BenchmarkPatchBurstWithRealAPIServer(b *testing.B) {
	env := controlPlane.Env(b)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	sizes := []int{1000}
	if os.Getenv("BINDKIT_BENCH_LARGE") == "1" {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		ns := createNamespace(b, admin, "burst-")
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("web-%05d", i)
		}
		if err := parallel(names, 16, func(name string) error {
			_, err := admin.AppsV1().Deployments(ns).Create(b.Context(), fixtures.RealisticDeployment(ns, name), metav1.CreateOptions{})
			return err
		}); err != nil {
			b.Fatalf("create %d Deployments: %v", n, err)
		}
		for _, limits := range []struct {
			name  string
			flags Flags
		}{
			{"default", Flags{}},
			{"off", Flags{KubeAPIQPS: -1}},
		} {
			b.Run(fmt.Sprintf("n=%d/limits=%s", n, limits.name), func(b *testing.B) {
				f := limits.flags
				f.Kubeconfig = env.KubeconfigPath
				round := 0
				for b.Loop() {
					// A new client per round starts with a full bucket, as
					// a process does.
					cfg, err := restConfig(f)
					if err != nil {
						b.Fatal(err)
					}
					client := kubernetes.NewForConfigOrDie(cfg)
					round++
					patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"bindkit.dev/round":"%d-%s"}}}}}`, round, limits.name)
					if err := parallel(names, 8, func(name string) error {
						_, err := client.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
						return err
					}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "patches/s")
			})
		}
	}
}

// parallel calls do for every name, at most workers at a time, and returns
// the first error.
func parallel(names []string, workers int, do func(name string) error) error {
	work := make(chan string)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Go(func() {
			for name := range work {
				if err := do(name); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	return first
}

// BenchmarkMetricsScrape is the cost of one scrape of the process's
// metrics endpoint (newMetricsServer, on loopback, a registry with the
// Go runtime's, the process's and bindkit's families) as a scraper sees
// it: over plain HTTP (--metrics-secure=false); over HTTPS with a bearer
// token whose answer is in memory (the default, after a scraper's first
// scrape), on a kept-alive connection as Prometheus scrapes, and on a
// new connection each time (a TLS handshake per scrape); and the
// authorization filter alone, answering from memory. reviews/op counts
// the TokenReviews and SubjectAccessReviews sent per scrape: 0 once the
// answer is in memory.
//
//	go test -run '^$' -bench MetricsScrape -benchtime 2000x -count 5 ./injection/sharedmain/
func BenchmarkMetricsScrape(b *testing.B) {
	reviews := &fakeReviews{tokens: map[string]string{"reader-token": "reader"}, readers: map[string]bool{"reader": true}}
	client := reviews.client()
	reg := metrics.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		b.Fatal(err)
	}
	serve := func(b *testing.B, f Flags) string {
		m, err := newMetricsServer(f, reg, client, zap.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.serve(ctx, ln) }()
		b.Cleanup(func() { cancel(); <-done })
		return ln.Addr().String() + MetricsPath
	}
	scrapeLoop := func(b *testing.B, url, token string, keepAlive bool) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: !keepAlive}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		get := func() {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || n == 0 {
				b.Fatalf("scrape: %s, %d bytes", resp.Status, n)
			}
		}
		get() // the first scrape reviews the token
		before := reviews.tokenReviews.Load() + reviews.accessReviews.Load()
		for b.Loop() {
			get()
		}
		b.ReportMetric(float64(reviews.tokenReviews.Load()+reviews.accessReviews.Load()-before)/float64(b.N), "reviews/op")
	}

	b.Run("plain-http", func(b *testing.B) {
		scrapeLoop(b, "http://"+serve(b, Flags{MetricsInsecure: true}), "", true)
	})
	b.Run("https-token-in-memory/keep-alive", func(b *testing.B) {
		scrapeLoop(b, "https://"+serve(b, Flags{}), "reader-token", true)
	})
	b.Run("https-token-in-memory/new-connection", func(b *testing.B) {
		scrapeLoop(b, "https://"+serve(b, Flags{}), "reader-token", false)
	})
	b.Run("filter-only-in-memory", func(b *testing.B) {
		a, err := newMetricsAuth(metricsAuthOptions{Client: client})
		if err != nil {
			b.Fatal(err)
		}
		h := a.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest(http.MethodGet, MetricsPath, nil)
		r.Header.Set("Authorization", "Bearer reader-token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		for b.Loop() {
			h.ServeHTTP(w, r)
		}
		if w.Code != http.StatusOK {
			b.Fatalf("filter answered %d", w.Code)
		}
	})
}
