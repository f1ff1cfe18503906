package hostile_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/scrape"
)

// TestMetricsMadeUpTokenFloodWithRealAPIServer floods the example
// controller's metrics endpoint, at its default settings, with scrapes
// carrying made-up bearer tokens from many connections, while a scraper
// with a real token (the admin's) keeps scraping: every made-up token is
// refused (401, or 429 once the reviews of unknown tokens are spent), the
// scraper is answered throughout, the process sends the kube-apiserver no
// more TokenReviews than the bound (5 a second, bursts of 10), and its
// goroutines return to rest.
func TestMetricsMadeUpTokenFloodWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	c := startController(t, env, nil)
	url := "https://" + c.metrics + sharedmain.MetricsPath
	posts := func() float64 {
		t.Helper()
		f, err := scrape.GetWithToken(t.Context(), url, c.metricsToken)
		if err != nil {
			t.Fatalf("the admin's scrape: %v", err)
		}
		// A TokenReview is a POST; the process sends no other while idle.
		return f.Sum("bindkit_client_requests_total", map[string]string{"method": "POST"})
	}
	postsBefore := posts()
	rest := c.resources()

	const workers, flood = 16, 5 * time.Second
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var mu sync.Mutex
	codes := map[int]int{}
	ctx, cancel := context.WithTimeout(t.Context(), flood)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+madeUpToken())
				code := 0
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	scraped := 0
	for ctx.Err() == nil {
		if _, err := scrape.GetWithToken(t.Context(), url, c.metricsToken); err != nil {
			t.Errorf("the admin's scrape during the flood: %v", err)
		}
		scraped++
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(start)
	tr.CloseIdleConnections()

	reviews := posts() - postsBefore
	// The bucket starts full (10) and refills at 5 a second; one more
	// second of slack for the clock's edges.
	bound := float64(sharedmain.DefaultMetricsReviewBurst) + sharedmain.DefaultMetricsReviewsPerSecond*(elapsed.Seconds()+1)
	total := 0
	for _, n := range codes {
		total += n
	}
	t.Logf("metrics flood: %d made-up tokens from %d connections in %v, answered %v; %.0f POSTs to the kube-apiserver (bound %.0f); the admin scraped %d times",
		total, workers, elapsed.Round(time.Millisecond), codes, reviews, bound, scraped)
	if codes[http.StatusUnauthorized] == 0 || codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != total {
		t.Errorf("made-up tokens answered %v, want only 401 and 429", codes)
	}
	if reviews > bound {
		t.Errorf("%.0f POSTs (TokenReviews) during the flood, want at most %.0f", reviews, bound)
	}
	var after resources
	deadline := time.Now().Add(30 * time.Second)
	for {
		if after = c.resources(); after.goroutines <= rest.goroutines+10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if after.goroutines > rest.goroutines+10 {
		t.Errorf("goroutines after the flood %d, at rest %d", after.goroutines, rest.goroutines)
	}
}

// madeUpToken is a token no one issued, shaped like a ServiceAccount's.
func madeUpToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "eyJhbGciOiJSUzI1NiJ9." + hex.EncodeToString(b) + ".c2ln"
}
