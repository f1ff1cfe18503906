package sharedmain

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The metrics endpoint's defaults (metricsAuthOptions). A scraper asks
// every 15 to 60 seconds: with an answer kept for a minute, it costs two
// API calls a minute, not two a scrape; a role taken away stops being
// honoured within that minute.
const (
	// DefaultMetricsAllowTTL is how long a token allowed to get /metrics
	// is answered without asking the kube-apiserver again.
	DefaultMetricsAllowTTL = time.Minute
	// DefaultMetricsDenyTTL is how long an authenticated token refused
	// /metrics is refused without asking again, so a scraper whose role
	// is missing costs one review every ten seconds, and a grant takes
	// effect within them.
	DefaultMetricsDenyTTL = 10 * time.Second
	// DefaultMetricsAuthCacheSize is how many authenticated tokens are
	// remembered at once. Only tokens the kube-apiserver authenticated
	// enter the cache, so a caller with made-up tokens cannot grow it,
	// nor push a scraper's token out.
	DefaultMetricsAuthCacheSize = 256
	// DefaultMetricsReviewsPerSecond and DefaultMetricsReviewBurst bound
	// the reviews the process sends for tokens it does not remember: a
	// flood of made-up tokens costs the kube-apiserver at most this many
	// TokenReviews a second, and is answered 429 beyond them.
	DefaultMetricsReviewsPerSecond = 5
	DefaultMetricsReviewBurst      = 10
	// DefaultMetricsReviewsInFlight is how many reviews may wait on the
	// kube-apiserver at once; more are answered 429.
	DefaultMetricsReviewsInFlight = 4
	// DefaultMetricsReviewTimeout bounds one scrape's TokenReview and
	// SubjectAccessReview together.
	DefaultMetricsReviewTimeout = 10 * time.Second
	// maxBearerTokenBytes bounds the token a request may carry: a
	// ServiceAccount's is about a kilobyte, an OIDC provider's a few.
	maxBearerTokenBytes = 16 << 10
)

// metricsAuthOptions configure metricsAuth, in the one configuration
// style: zero fields take the defaults above, and newMetricsAuth names a
// field it cannot use.
type metricsAuthOptions struct {
	// Client sends the TokenReviews and SubjectAccessReviews (it needs
	// create on both, cluster-wide). Required.
	Client kubernetes.Interface
	// AllowTTL, DenyTTL: DefaultMetricsAllowTTL, DefaultMetricsDenyTTL.
	AllowTTL, DenyTTL time.Duration
	// CacheSize: DefaultMetricsAuthCacheSize.
	CacheSize int
	// ReviewsPerSecond, ReviewBurst: DefaultMetricsReviewsPerSecond,
	// DefaultMetricsReviewBurst.
	ReviewsPerSecond float64
	ReviewBurst      int
	// ReviewsInFlight: DefaultMetricsReviewsInFlight.
	ReviewsInFlight int
	// ReviewTimeout: DefaultMetricsReviewTimeout.
	ReviewTimeout time.Duration
	// Logger logs failed reviews (warn) and refusals (debug); default
	// none.
	Logger *zap.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

func (o metricsAuthOptions) withDefaults() metricsAuthOptions {
	o.AllowTTL = cmp.Or(o.AllowTTL, DefaultMetricsAllowTTL)
	o.DenyTTL = cmp.Or(o.DenyTTL, DefaultMetricsDenyTTL)
	o.CacheSize = cmp.Or(o.CacheSize, DefaultMetricsAuthCacheSize)
	o.ReviewsPerSecond = cmp.Or(o.ReviewsPerSecond, DefaultMetricsReviewsPerSecond)
	o.ReviewBurst = cmp.Or(o.ReviewBurst, DefaultMetricsReviewBurst)
	o.ReviewsInFlight = cmp.Or(o.ReviewsInFlight, DefaultMetricsReviewsInFlight)
	o.ReviewTimeout = cmp.Or(o.ReviewTimeout, DefaultMetricsReviewTimeout)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func (o metricsAuthOptions) validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("metrics authentication: Client is required"))
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"AllowTTL", o.AllowTTL < 0}, {"DenyTTL", o.DenyTTL < 0}, {"CacheSize", o.CacheSize < 0},
		{"ReviewsPerSecond", o.ReviewsPerSecond < 0}, {"ReviewBurst", o.ReviewBurst < 0},
		{"ReviewsInFlight", o.ReviewsInFlight < 0}, {"ReviewTimeout", o.ReviewTimeout < 0},
	} {
		if f.bad {
			errs = append(errs, fmt.Errorf("metrics authentication: %s is negative", f.name))
		}
	}
	return errors.Join(errs...)
}

// metricsAuth lets a request through to the metrics only when its bearer
// token belongs to a user the kube-apiserver authorizes to get /metrics:
// 401 without a valid token, 403 for a user without the grant, 429 when
// the reviews of unknown tokens are over their bounds, 503 when the
// kube-apiserver cannot be asked. It is the shape of kubebuilder's default
// (controller-runtime's metrics filter), on client-go alone.
type metricsAuth struct {
	opts     metricsAuthOptions
	cache    *authCache
	limiter  *tokenBucket
	inFlight chan struct{}
}

func newMetricsAuth(opts metricsAuthOptions) (*metricsAuth, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &metricsAuth{
		opts:     opts,
		cache:    newAuthCache(opts.CacheSize),
		limiter:  newTokenBucket(opts.ReviewsPerSecond, opts.ReviewBurst, opts.Now()),
		inFlight: make(chan struct{}, opts.ReviewsInFlight),
	}, nil
}

// authDecision is what the kube-apiserver said of one token.
type authDecision int

const (
	unauthenticated authDecision = iota // no such token, expired, or the wrong audience
	forbidden                           // a user who may not get /metrics
	allowed
)

// wrap returns next behind the authentication and authorization of the
// request's bearer token.
func (a *metricsAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "metrics: only GET", http.StatusMethodNotAllowed)
			return
		}
		token, ok := bearerToken(r.Header)
		if !ok {
			unauthorized(w)
			return
		}
		decision, user, status := a.decide(r.Context(), token)
		switch {
		case status != 0:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "metrics: cannot review the token now; retry", status)
		case decision == unauthenticated:
			unauthorized(w)
		case decision == forbidden:
			http.Error(w, fmt.Sprintf("metrics: user %q may not get %s (grant it the metrics-reader ClusterRole)", user, MetricsPath), http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
	http.Error(w, "metrics: a valid bearer token is required (Authorization: Bearer <token>)", http.StatusUnauthorized)
}

// bearerToken returns the token of the request's one Authorization
// header, when it is a Bearer token of visible ASCII no longer than
// maxBearerTokenBytes.
func bearerToken(h http.Header) (string, bool) {
	values := h.Values("Authorization")
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	if token == "" || len(token) > maxBearerTokenBytes {
		return "", false
	}
	for i := range len(token) {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return "", false
		}
	}
	return token, true
}

// decide returns what is known of token: from the cache, or else from a
// TokenReview and, for an authenticated user, a SubjectAccessReview,
// within the bounds on reviews. A non-zero status is the answer when the
// token could not be reviewed (429 over the bounds, 503 when the
// kube-apiserver failed).
func (a *metricsAuth) decide(ctx context.Context, token string) (authDecision, string, int) {
	key := sha256.Sum256([]byte(token))
	now := a.opts.Now()
	if e, ok := a.cache.get(key, now); ok {
		return e.decision, e.user, 0
	}
	select {
	case a.inFlight <- struct{}{}:
		defer func() { <-a.inFlight }()
	default:
		return unauthenticated, "", http.StatusTooManyRequests
	}
	if !a.limiter.take(now) {
		return unauthenticated, "", http.StatusTooManyRequests
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.ReviewTimeout)
	defer cancel()
	decision, user, err := a.review(ctx, token)
	if err != nil {
		a.opts.Logger.Warn("metrics: review of a scraper's token failed", zap.Error(err))
		return unauthenticated, "", http.StatusServiceUnavailable
	}
	switch decision {
	case allowed:
		a.cache.put(key, authEntry{decision: decision, user: user, expires: now.Add(a.opts.AllowTTL)}, now)
	case forbidden:
		a.opts.Logger.Debug("metrics: scrape refused", zap.String("user", user))
		a.cache.put(key, authEntry{decision: decision, user: user, expires: now.Add(a.opts.DenyTTL)}, now)
	}
	return decision, user, 0
}

// review asks the kube-apiserver who token is (a TokenReview with the
// server's own audiences) and whether that user may get MetricsPath (a
// SubjectAccessReview of the non-resource URL).
func (a *metricsAuth) review(ctx context.Context, token string) (authDecision, string, error) {
	tr, err := a.opts.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return unauthenticated, "", fmt.Errorf("create TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return unauthenticated, "", nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.opts.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: MetricsPath, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return unauthenticated, u.Username, fmt.Errorf("create SubjectAccessReview for user %q: %w", u.Username, err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return forbidden, u.Username, nil
	}
	return allowed, u.Username, nil
}

// authEntry is a decision on one authenticated token, good until expires.
type authEntry struct {
	decision authDecision
	user     string
	expires  time.Time
}

// authCache remembers decisions on authenticated tokens by the SHA-256 of
// the token (never the token itself), at most size of them: a full cache
// drops what has expired, else the entry nearest its expiry.
type authCache struct {
	mu      sync.Mutex
	size    int
	entries map[[sha256.Size]byte]authEntry
}

func newAuthCache(size int) *authCache {
	return &authCache{size: size, entries: make(map[[sha256.Size]byte]authEntry, size)}
}

func (c *authCache) get(key [sha256.Size]byte, now time.Time) (authEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if ok && !now.Before(e.expires) {
		delete(c.entries, key)
		return authEntry{}, false
	}
	return e, ok
}

// put stores e; the scan for room runs only when the cache is full,
// which takes a new authenticated token, at most the reviews' rate.
func (c *authCache) put(key [sha256.Size]byte, e authEntry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.size {
		var soonest [sha256.Size]byte
		var soonestAt time.Time
		for k, v := range c.entries {
			if !now.Before(v.expires) {
				delete(c.entries, k)
				continue
			}
			if soonestAt.IsZero() || v.expires.Before(soonestAt) {
				soonest, soonestAt = k, v.expires
			}
		}
		if len(c.entries) >= c.size {
			delete(c.entries, soonest)
		}
	}
	c.entries[key] = e
}

func (c *authCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// tokenBucket allows rate events a second with bursts of burst.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, burst int, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// take spends one event at now, reporting whether the bucket had one.
func (b *tokenBucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+elapsed*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
