package scrape

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Get scrapes url (http://host:port/metrics) in Prometheus' text format,
// with no credentials: a process run with --metrics-secure=false.
func Get(ctx context.Context, url string) (Families, error) {
	return GetWithToken(ctx, url, "")
}

// GetWithToken scrapes url as Prometheus does a bindkit process that
// serves its metrics securely (the default): over HTTPS
// (https://host:port/metrics) with token as a bearer token, not verifying
// the certificate (the process's self-signed one, Prometheus's
// insecure_skip_verify). An empty token sends none. A status other than
// 200 is an error that says it (Status).
func GetWithToken(ctx context.Context, url, token string) (Families, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &StatusError{URL: url, Code: resp.StatusCode, Body: string(body)}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return Families(mfs), nil
}

// client scrapes without verifying certificates, as a Prometheus set to
// insecure_skip_verify does: bindkit's default metrics certificate is
// self-signed, so there is nothing to verify it against.
var client = &http.Client{Transport: &http.Transport{
	TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
	MaxIdleConnsPerHost: 2,
}}

// StatusError is a scrape answered with a status other than 200.
type StatusError struct {
	URL  string
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("scrape %s: %d %s: %s", e.URL, e.Code, http.StatusText(e.Code), e.Body)
}

// Status is the HTTP status of a scrape that returned err: 200 for nil,
// the answer's for a StatusError, 0 when none came.
func Status(err error) int {
	var se *StatusError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &se):
		return se.Code
	}
	return 0
}

// Sum adds up the samples of family name whose labels include labels (nil
// matches all): counters' and gauges' values, histograms' counts.
func (f Families) Sum(name string, labels map[string]string) float64 {
	sum := 0.0
	for _, m := range f.matching(name, labels) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// Has reports whether family name has a sample whose labels include
// labels.
func (f Families) Has(name string, labels map[string]string) bool {
	return len(f.matching(name, labels)) > 0
}

func (f Families) matching(name string, labels map[string]string) []*dto.Metric {
	mf := f[name]
	if mf == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range mf.GetMetric() {
		if hasLabels(m, labels) {
			out = append(out, m)
		}
	}
	return out
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
