package sharedmain

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews answers TokenReviews and SubjectAccessReviews as a
// kube-apiserver would for a fixed set of users: tokens maps a token to
// its user, readers are the users who may get /metrics. It counts the
// reviews it answered.
type fakeReviews struct {
	tokens  map[string]string
	readers map[string]bool
	err     error

	tokenReviews, accessReviews atomic.Int64
	// lastAccess is the last SubjectAccessReview's spec.
	mu         sync.Mutex
	lastAccess authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviews) client() *kubefake.Clientset {
	c := kubefake.NewClientset()
	f.install(c)
	return c
}

// install makes c answer the reviews.
func (f *fakeReviews) install(c *kubefake.Clientset) {
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenReviews.Add(1)
		if f.err != nil {
			return true, nil, f.err
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if user, ok := f.tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: user, UID: "uid-" + user, Groups: []string{"system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"scopes": {"metrics"}},
			}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accessReviews.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		f.lastAccess = sar.Spec
		f.mu.Unlock()
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = f.readers[sar.Spec.User] && na != nil && na.Path == MetricsPath && na.Verb == "get"
		return true, sar, nil
	})
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestAuth(t *testing.T, f *fakeReviews, opts metricsAuthOptions) (http.Handler, *metricsAuth, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	opts.Client = f.client()
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	a, err := newMetricsAuth(opts)
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "bindkit_up 1") })
	return a.wrap(ok), a, clock
}

// scrapeWith answers one request to h with the given Authorization
// headers.
func scrapeWith(h http.Handler, method string, authorization ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, MetricsPath, nil)
	for _, v := range authorization {
		r.Header.Add("Authorization", v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestMetricsAuthAnswers: what each caller gets, and how many reviews
// it cost.
func TestMetricsAuthAnswers(t *testing.T) {
	tests := []struct {
		name          string
		method        string
		authorization []string
		err           error
		wantCode      int
		wantReviews   [2]int64 // TokenReviews, SubjectAccessReviews
	}{
		{name: "reader", authorization: []string{"Bearer reader-token"}, wantCode: 200, wantReviews: [2]int64{1, 1}},
		{name: "scheme in any case", authorization: []string{"bearer reader-token"}, wantCode: 200, wantReviews: [2]int64{1, 1}},
		{name: "HEAD is a get", method: http.MethodHead, authorization: []string{"Bearer reader-token"}, wantCode: 200, wantReviews: [2]int64{1, 1}},
		{name: "user without the grant", authorization: []string{"Bearer stranger-token"}, wantCode: 403, wantReviews: [2]int64{1, 1}},
		{name: "unknown token", authorization: []string{"Bearer made-up"}, wantCode: 401, wantReviews: [2]int64{1, 0}},
		{name: "no token", wantCode: 401},
		{name: "empty token", authorization: []string{"Bearer "}, wantCode: 401},
		{name: "basic credentials", authorization: []string{"Basic dXNlcjpwYXNz"}, wantCode: 401},
		{name: "two headers", authorization: []string{"Bearer reader-token", "Bearer reader-token"}, wantCode: 401},
		{name: "token with a space", authorization: []string{"Bearer reader token"}, wantCode: 401},
		{name: "token with a control character", authorization: []string{"Bearer reader\x01token"}, wantCode: 401},
		{name: "token too long", authorization: []string{"Bearer " + strings.Repeat("a", maxBearerTokenBytes+1)}, wantCode: 401},
		{name: "POST", method: http.MethodPost, authorization: []string{"Bearer reader-token"}, wantCode: 405},
		{name: "kube-apiserver fails", authorization: []string{"Bearer reader-token"}, err: errors.New("connection refused"), wantCode: 503, wantReviews: [2]int64{1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeReviews{tokens: map[string]string{"reader-token": "reader", "stranger-token": "stranger"}, readers: map[string]bool{"reader": true}, err: tc.err}
			h, _, _ := newTestAuth(t, f, metricsAuthOptions{})
			w := scrapeWith(h, cmpOr(tc.method, http.MethodGet), tc.authorization...)
			if w.Code != tc.wantCode {
				t.Errorf("status %d %q, want %d", w.Code, w.Body.String(), tc.wantCode)
			}
			if got := [2]int64{f.tokenReviews.Load(), f.accessReviews.Load()}; got != tc.wantReviews {
				t.Errorf("reviews (TokenReview, SubjectAccessReview) = %v, want %v", got, tc.wantReviews)
			}
			if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if w.Code == 200 && !strings.Contains(w.Body.String(), "bindkit_up") && tc.method != http.MethodHead {
				t.Errorf("answered without the metrics: %q", w.Body.String())
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestMetricsAuthAsksForTheUsersGrant: the SubjectAccessReview carries
// the authenticated user whole and asks for get on the non-resource URL
// /metrics.
func TestMetricsAuthAsksForTheUsersGrant(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{"t": "reader"}, readers: map[string]bool{"reader": true}}
	h, _, _ := newTestAuth(t, f, metricsAuthOptions{})
	scrapeWith(h, http.MethodGet, "Bearer t")
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "reader", UID: "uid-reader", Groups: []string{"system:authenticated"},
		Extra:                 map[string]authorizationv1.ExtraValue{"scopes": {"metrics"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff(want, f.lastAccess); diff != "" {
		t.Errorf("SubjectAccessReview spec (-want +got):\n%s", diff)
	}
}

// TestMetricsAuthCaches: an allowed token is answered from memory for
// AllowTTL, a refused one for DenyTTL, an unauthenticated one never.
func TestMetricsAuthCaches(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{"reader-token": "reader", "stranger-token": "stranger"}, readers: map[string]bool{"reader": true}}
	h, a, clock := newTestAuth(t, f, metricsAuthOptions{})
	reviews := func() [2]int64 { return [2]int64{f.tokenReviews.Load(), f.accessReviews.Load()} }
	steps := []struct {
		what        string
		step        time.Duration
		token       string
		wantCode    int
		wantReviews [2]int64 // in all, so far
	}{
		{"first scrape", 0, "reader-token", 200, [2]int64{1, 1}},
		{"scrape 15 s later, from memory", 15 * time.Second, "reader-token", 200, [2]int64{1, 1}},
		{"scrape 59 s after the first, from memory", 44 * time.Second, "reader-token", 200, [2]int64{1, 1}},
		{"a minute after the first, asked again", time.Second, "reader-token", 200, [2]int64{2, 2}},
		{"stranger refused", 0, "stranger-token", 403, [2]int64{3, 3}},
		{"stranger again, from memory", 9 * time.Second, "stranger-token", 403, [2]int64{3, 3}},
		{"stranger after DenyTTL, asked again", time.Second, "stranger-token", 403, [2]int64{4, 4}},
		{"unknown token", 0, "made-up", 401, [2]int64{5, 4}},
		{"unknown token again, asked again", 0, "made-up", 401, [2]int64{6, 4}},
	}
	for _, s := range steps {
		clock.step(s.step)
		w := scrapeWith(h, http.MethodGet, "Bearer "+s.token)
		if w.Code != s.wantCode || reviews() != s.wantReviews {
			t.Errorf("%s: status %d, reviews %v; want %d, %v", s.what, w.Code, reviews(), s.wantCode, s.wantReviews)
		}
	}
	if got := a.cache.len(); got != 2 {
		t.Errorf("cache holds %d tokens, want 2 (the reader's and the stranger's)", got)
	}
}

// TestMetricsAuthBoundsUnknownTokens: a flood of made-up tokens costs at
// most the reviews' burst and rate, grows no cache, and a scraper whose
// answer is in memory is served throughout.
func TestMetricsAuthBoundsUnknownTokens(t *testing.T) {
	f := &fakeReviews{tokens: map[string]string{"reader-token": "reader"}, readers: map[string]bool{"reader": true}}
	h, a, clock := newTestAuth(t, f, metricsAuthOptions{})
	if w := scrapeWith(h, http.MethodGet, "Bearer reader-token"); w.Code != 200 {
		t.Fatalf("reader: %d", w.Code)
	}
	codes := map[int]int{}
	const seconds, perSecond = 5, 200
	for s := range seconds {
		for i := range perSecond {
			codes[scrapeWith(h, http.MethodGet, fmt.Sprintf("Bearer made-up-%d-%d", s, i)).Code]++
		}
		if w := scrapeWith(h, http.MethodGet, "Bearer reader-token"); w.Code != 200 {
			t.Errorf("reader during the flood, second %d: %d", s, w.Code)
		}
		clock.step(time.Second)
	}
	// The reader's first scrape took one review from the bucket.
	maxReviews := int64(DefaultMetricsReviewBurst + (seconds-1)*DefaultMetricsReviewsPerSecond)
	if got := f.tokenReviews.Load() - 1; got > maxReviews {
		t.Errorf("%d TokenReviews for %d made-up tokens, want at most %d", got, seconds*perSecond, maxReviews)
	}
	if codes[401] == 0 || codes[429] == 0 || codes[401]+codes[429] != seconds*perSecond {
		t.Errorf("answers to made-up tokens %v, want only 401 and 429", codes)
	}
	if got := a.cache.len(); got != 1 {
		t.Errorf("cache holds %d tokens after the flood, want 1 (the reader's)", got)
	}
}

// TestMetricsAuthBoundsReviewsInFlight: while the kube-apiserver is slow,
// at most ReviewsInFlight reviews wait on it; the next is answered 429 at
// once. (A server of its own: the fake clientset runs one reactor at a
// time.)
func TestMetricsAuthBoundsReviewsInFlight(t *testing.T) {
	var waiting atomic.Int64
	release := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waiting.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false}}`)
	}))
	defer api.Close()
	a, err := newMetricsAuth(metricsAuthOptions{Client: kubernetes.NewForConfigOrDie(&rest.Config{Host: api.URL, QPS: -1})})
	if err != nil {
		t.Fatal(err)
	}
	h := a.wrap(http.NotFoundHandler())
	var wg sync.WaitGroup
	for i := range DefaultMetricsReviewsInFlight {
		wg.Go(func() { scrapeWith(h, http.MethodGet, fmt.Sprintf("Bearer slow-%d", i)) })
	}
	poll(t, "reviews waiting on the kube-apiserver", func(context.Context) (bool, error) {
		return waiting.Load() == DefaultMetricsReviewsInFlight, nil
	})
	if w := scrapeWith(h, http.MethodGet, "Bearer one-more"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("a review beyond those in flight: %d (Retry-After %q), want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	close(release)
	wg.Wait()
	if got := waiting.Load(); got != DefaultMetricsReviewsInFlight {
		t.Errorf("%d TokenReviews, want %d", got, DefaultMetricsReviewsInFlight)
	}
}

// TestAuthCacheStaysBounded: a full cache drops what has expired, else
// the entry nearest its expiry, and never holds more than its size.
func TestAuthCacheStaysBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	key := func(i int) [sha256.Size]byte { return sha256.Sum256(fmt.Appendf(nil, "token-%d", i)) }
	c := newAuthCache(3)
	c.put(key(1), authEntry{decision: allowed, expires: now.Add(time.Minute)}, now)
	c.put(key(2), authEntry{decision: forbidden, expires: now.Add(10 * time.Second)}, now)
	c.put(key(3), authEntry{decision: allowed, expires: now.Add(2 * time.Minute)}, now)
	c.put(key(4), authEntry{decision: allowed, expires: now.Add(time.Minute)}, now)
	held := func(at time.Time) []int {
		var out []int
		for i := 1; i <= 5; i++ {
			if _, ok := c.get(key(i), at); ok {
				out = append(out, i)
			}
		}
		return out
	}
	if diff := cmp.Diff([]int{1, 3, 4}, held(now)); diff != "" {
		t.Errorf("full cache dropped the wrong entry (-want +got):\n%s", diff)
	}
	later := now.Add(90 * time.Second)
	c.put(key(5), authEntry{decision: allowed, expires: later.Add(time.Minute)}, later)
	if diff := cmp.Diff([]int{3, 5}, held(later)); diff != "" {
		t.Errorf("after the minute entries expired (-want +got):\n%s", diff)
	}
	if c.len() > 3 {
		t.Errorf("cache holds %d, more than its size 3", c.len())
	}
}

func TestTokenBucket(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	b := newTokenBucket(2, 3, start)
	var got []bool
	for _, at := range []time.Duration{0, 0, 0, 0, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second} {
		got = append(got, b.take(start.Add(at)))
	}
	want := []bool{true, true, true, false, false, true, false, true, true, true, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("takes (-want +got):\n%s", diff)
	}
}

func TestMetricsAuthOptionsValidate(t *testing.T) {
	_, err := newMetricsAuth(metricsAuthOptions{AllowTTL: -1, ReviewsInFlight: -1})
	want := "metrics authentication: Client is required\nmetrics authentication: AllowTTL is negative\nmetrics authentication: ReviewsInFlight is negative"
	if err == nil || err.Error() != want {
		t.Errorf("newMetricsAuth = %v, want %q", err, want)
	}
}

// FuzzBearerToken: whatever the header, a token comes back only when it
// is the header's, non-empty, bounded and of visible ASCII.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer abc", "Bearer  abc ", "Basic abc", "Bearer", "Bearer \x7f", "Bearer a b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		h := http.Header{}
		h.Set("Authorization", header)
		token, ok := bearerToken(h)
		if !ok {
			return
		}
		if token == "" || len(token) > maxBearerTokenBytes || !strings.Contains(header, token) {
			t.Fatalf("bearerToken(%q) = %q", header, token)
		}
		for i := range len(token) {
			if token[i] <= ' ' || token[i] > '~' {
				t.Fatalf("bearerToken(%q) = %q, with byte %#x", header, token, token[i])
			}
		}
	})
}
