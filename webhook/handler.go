package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/bindkit/bindkit/internal/jsonscan"
)

// The AdmissionReview versions the server speaks. v1beta1 has the same
// fields as v1, so one Go type decodes both; only the echoed apiVersion
// differs.
const (
	admissionV1      = "admission.k8s.io/v1"
	admissionV1beta1 = "admission.k8s.io/v1beta1"
	reviewKind       = "AdmissionReview"
)

// syncPollInterval is how often a request waiting for a controller's
// informers checks HasSynced; it matters only during start-up.
const syncPollInterval = 20 * time.Millisecond

// route is one registered controller.
type route struct {
	ctrl     Admitter
	syncer   Syncer // nil when the controller has no informers
	synced   atomic.Bool
	observer func(Admission) // nil without an Options.Observer
}

// hasSynced reports whether the controller is ready, remembering success so
// the hot path is one atomic load.
func (rt *route) hasSynced() bool {
	if rt.syncer == nil || rt.synced.Load() {
		return true
	}
	if rt.syncer.HasSynced() {
		rt.synced.Store(true)
		return true
	}
	return false
}

// waitSynced blocks until the controller has synced, ctx ends or timeout
// passes.
func (rt *route) waitSynced(ctx context.Context, timeout time.Duration) bool {
	if rt.hasSynced() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(syncPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return rt.hasSynced()
		case <-tick.C:
			if rt.hasSynced() {
				return true
			}
		}
	}
}

// reviewError is a rejection of the HTTP request itself, before any
// controller saw it.
type reviewError struct {
	code int
	msg  string
}

func badRequest(format string, args ...any) *reviewError {
	return &reviewError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// requestOverhead is what one admission is charged beyond its body: the
// request, its headers and the small values of its decision. (A
// connection's own buffers and goroutine are bounded by MaxConnections.)
const requestOverhead = 16 << 10

// bodyReservation is the most a body of n bytes is charged: the body, the
// buffers it outgrew while arriving, and the copy of its objects in the
// decoded review. (decodeReview keeps the objects as slices of the body,
// copying them only for the inputs it leaves to sigs.k8s.io/json; the
// charge stays, so the same bodies fit the budget as before.)
func bodyReservation(n int64) int64 { return 3*n + requestOverhead }

// reviewType is what jsonscan knows of an AdmissionReview. It marks
// request.object, so that decodeReview steps over the object the scan
// has found rather than walking it again.
var reviewType = sync.OnceValue(func() *jsonscan.Type {
	t := jsonscan.NewBuilder().TypeOf(reflect.TypeFor[admissionv1.AdmissionReview]())
	t.Fields["request"].Type.Fields["object"].Mark = true
	return t
})

// firstBodyChunk is the buffer a body starts in. A body is charged for
// this chunk first, so clients that announce a large body and send none of
// it hold little of the memory budget; one that has filled the chunk is
// charged whole (its announced length) at once, and one of unknown length
// as it grows. A body sent slowly is cut by the minimum body rate.
const firstBodyChunk = 4 << 10

// retryAfterSeconds is the Retry-After of overload answers: long enough for
// the requests in flight to finish, short beside a webhook's timeout.
const retryAfterSeconds = "1"

// answered is what the answer to one AdmissionReview tells the observer:
// the request (nil when none could be decoded), the outcome, whether the
// request was a dry run and the length of the patch sent.
type answered struct {
	req        *admissionv1.AdmissionRequest
	outcome    Outcome
	dryRun     bool
	patchBytes int
}

// serveAdmission answers one AdmissionReview for rt and observes it: a
// decorator of answer, so that every answer is observed exactly once,
// whichever step ended it, and no step has to remember to.
func (s *Server) serveAdmission(w http.ResponseWriter, r *http.Request, rt *route) {
	start := time.Now()
	a := s.answer(w, r, rt, start)
	rt.observe(start, a.req, a.outcome, a.dryRun, a.patchBytes)
}

// answer runs the steps of one admission: decode the review (charging the
// memory budget as it goes), take a place among the admissions in flight,
// wait for the controller's informers, decide (Admit), and write the
// response. Each step that ends the request has written its HTTP answer
// when answer returns.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, rt *route, start time.Time) answered {
	timeout, hasTimeout := timeoutParam(r.URL)
	// The controller's context, as context.WithTimeout(r.Context(),
	// timeout) with the request's state and dry-run mark, in one
	// allocation and without a timer unless the controller waits on it.
	ctx := s.newAdmissionContext(r.Context(), start.Add(timeout), hasTimeout)
	defer ctx.stop()
	st := &ctx.state
	defer st.release()

	review, rerr := s.decode(w, r, st, timeout)
	if rerr != nil {
		s.refuse(w, r, rerr)
		return answered{outcome: outcomeOfCode(rerr.code, OutcomeInvalid)}
	}
	req := review.Request
	a := answered{req: req, dryRun: req.DryRun != nil && *req.DryRun}
	// The body is in: the connection is not cut while it is decided.
	if c := connFrom(r.Context()); c != nil {
		c.l.deciding(c)
	}
	// Counted once the body is in: requests still arriving hold a
	// connection and their share of the memory budget, not a decision's
	// place.
	if n := s.inFlight.Add(1); n > int64(s.opts.MaxAdmissionsInFlight) {
		s.inFlight.Add(-1)
		s.overloaded(w, r, fmt.Sprintf("webhook overloaded: %d admissions in flight, its limit (%s); retry", s.opts.MaxAdmissionsInFlight, s.opts.SettingName("MaxAdmissionsInFlight")))
		a.outcome = OutcomeOverloaded
		return a
	}
	defer s.inFlight.Add(-1)

	if !rt.waitSynced(ctx, s.opts.ReadinessTimeout) {
		msg := fmt.Sprintf("admission controller %s: informers have not synced", rt.ctrl.Path())
		s.logger.Warn("admission before sync", zap.String("path", rt.ctrl.Path()), zap.String("uid", string(req.UID)))
		http.Error(w, msg, http.StatusServiceUnavailable)
		a.outcome = OutcomeErrored
		return a
	}
	ctx.dryRun = a.dryRun

	resp, outcome := s.decide(ctx, w, r, rt, req)
	if resp == nil {
		a.outcome = outcome
		return a
	}
	var sent bool
	a.outcome, a.patchBytes, sent = s.respond(w, r, rt, review, resp, st)
	if sent {
		s.logAdmission(rt, req, a.dryRun, resp, start)
	}
	return a
}

// refuse answers a request whose review was not decoded.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, rerr *reviewError) {
	s.logger.Debug("rejected admission request", zap.String("path", r.URL.Path), zap.Int("code", rerr.code), zap.String("reason", rerr.msg))
	switch rerr.code {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	http.Error(w, rerr.msg, rerr.code)
}

// decide runs the admission controller on req. A nil response means it
// failed (panicked, returned none, or shed the request for load): the HTTP
// answer is written and the outcome says which. With a response the
// outcome is meaningless: respond decides it.
func (s *Server) decide(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *route, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, Outcome) {
	resp, panicked := s.admit(ctx, rt, req)
	switch {
	case panicked:
		http.Error(w, fmt.Sprintf("admission controller %s panicked on %s %s; see the webhook's log", rt.ctrl.Path(), req.Kind.Kind, objectName(req)), http.StatusInternalServerError)
		return nil, OutcomeErrored
	case resp == nil:
		s.logger.Error("admission controller returned no response", zap.String("path", rt.ctrl.Path()), zap.String("uid", string(req.UID)))
		http.Error(w, fmt.Sprintf("admission controller %s returned no response", rt.ctrl.Path()), http.StatusInternalServerError)
		return nil, OutcomeErrored
	case resp.Result != nil && resp.Result.Code == http.StatusTooManyRequests && !resp.Allowed:
		s.overloaded(w, r, resp.Result.Message)
		return nil, OutcomeOverloaded
	}
	return resp, 0
}

// respond writes resp as the answer to review and returns the outcome, the
// patch's length and whether resp was sent (an error answer otherwise).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, rt *route, review *admissionv1.AdmissionReview, resp *admissionv1.AdmissionResponse, st *requestState) (Outcome, int, bool) {
	req := review.Request
	// The encoded answer holds the patch in base64 inside a buffer that
	// grows while it is written.
	if err := st.reserve(3*int64(len(resp.Patch)) + 4096); err != nil {
		if errors.Is(err, ErrOverBudget) {
			http.Error(w, fmt.Sprintf("admission controller %s: answer: %v", rt.ctrl.Path(), err), http.StatusRequestEntityTooLarge)
			return OutcomeRefused, 0, false
		}
		s.overloaded(w, r, err.Error())
		return OutcomeOverloaded, 0, false
	}
	resp.UID = req.UID
	if len(resp.Patch) > 0 && resp.PatchType == nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	buf := s.answers.Get().(*[]byte)
	defer s.putAnswerBuffer(buf)
	body, err := encodeReview((*buf)[:0], review.TypeMeta, resp)
	if err != nil {
		s.logger.Error("encode AdmissionReview", zap.String("path", rt.ctrl.Path()), zap.String("uid", string(req.UID)), zap.Error(err))
		http.Error(w, fmt.Sprintf("encode AdmissionReview response: %v", err), http.StatusInternalServerError)
		return OutcomeErrored, 0, false
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body) // copies body: an io.Writer must not keep it
	if cap(body) > cap(*buf) {
		*buf = body // grown for a patch: pooled if not too large
	}
	return outcomeOf(resp, st.untouched.Load()), len(resp.Patch), true
}

// Buffers of encoded answers are pooled (Server.answers) up to
// maxPooledAnswer: an answer without a patch takes about 150 bytes, one
// with a patch of a few containers a few KiB, and a rare large patch's
// buffer is left to the collector rather than held by the pool.
const (
	firstAnswerBuffer = 512
	maxPooledAnswer   = 16 << 10
)

func (s *Server) putAnswerBuffer(buf *[]byte) {
	if cap(*buf) > maxPooledAnswer {
		return
	}
	*buf = (*buf)[:0]
	s.answers.Put(buf)
}

// logAdmission logs an answered admission at debug level.
func (s *Server) logAdmission(rt *route, req *admissionv1.AdmissionRequest, dryRun bool, resp *admissionv1.AdmissionResponse, start time.Time) {
	if ce := s.logger.Check(zap.DebugLevel, "admission"); ce != nil {
		ce.Write(
			zap.String("path", rt.ctrl.Path()),
			zap.String("uid", string(req.UID)),
			zap.String("kind", req.Kind.Kind),
			zap.String("namespace", req.Namespace),
			zap.String("name", req.Name),
			zap.String("operation", string(req.Operation)),
			zap.Bool("dryRun", dryRun),
			zap.Bool("allowed", resp.Allowed),
			zap.Bool("patched", len(resp.Patch) > 0),
			zap.Duration("latency", time.Since(start)),
		)
	}
}

// overloaded answers 429 with Retry-After and msg.
func (s *Server) overloaded(w http.ResponseWriter, r *http.Request, msg string) {
	if ce := s.logger.Check(zap.DebugLevel, "admission overloaded"); ce != nil {
		ce.Write(zap.String("path", r.URL.Path), zap.String("reason", msg))
	}
	w.Header().Set("Retry-After", retryAfterSeconds)
	http.Error(w, msg, http.StatusTooManyRequests)
}

// decode reads and checks the AdmissionReview of r, after charging st for
// its body. timeout, the request's ?timeout= when positive, shortens the
// body's read deadline.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, st *requestState, timeout time.Duration) (*admissionv1.AdmissionReview, *reviewError) {
	if r.Method != http.MethodPost {
		return nil, &reviewError{http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: AdmissionReviews are sent with POST", r.Method)}
	}
	// The kube-apiserver's Content-Type is exactly application/json:
	// parsing it (a map of its parameters) is for the others.
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, &reviewError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q not supported: want application/json", ct)}
		}
	}
	limit := s.opts.MaxRequestBodyBytes
	if r.ContentLength > limit {
		return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes (%s)", r.ContentLength, limit, s.opts.SettingName("MaxRequestBodyBytes"))}
	}
	readTimeout := s.opts.ReadTimeout
	if timeout > 0 && timeout < readTimeout {
		readTimeout = timeout
	}
	pacer := s.newBodyPacer(w, r, readTimeout)
	pacer.pace(0)
	// A body of announced length within the limit is cut at that length
	// by net/http already; only one of unknown length (chunked) needs the
	// limit's reader.
	var in io.Reader = r.Body
	if r.ContentLength < 0 {
		in = http.MaxBytesReader(w, r.Body, limit)
	}
	if err := st.reserve(requestOverhead); err != nil {
		drain(in, 0, &pacer)
		return nil, &reviewError{http.StatusTooManyRequests, err.Error()}
	}
	body, err := readBody(in, r.ContentLength, limit, st.reserve, &pacer)
	if err != nil {
		if errors.Is(err, ErrOverBudget) {
			return nil, &reviewError{http.StatusRequestEntityTooLarge, err.Error()}
		}
		if errors.Is(err, ErrOverloaded) {
			drain(in, int64(len(body)), &pacer)
			return nil, &reviewError{http.StatusTooManyRequests, err.Error()}
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds the limit of %d bytes (%s)", limit, s.opts.SettingName("MaxRequestBodyBytes"))}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &reviewError{http.StatusRequestTimeout, fmt.Sprintf("request body not received within %v, or slower than %s a second after %v (%s)",
				readTimeout, formatBytes(s.opts.MinBodyRate), s.opts.ReadHeaderTimeout, s.opts.SettingName("MinBodyRate"))}
		}
		return nil, badRequest("read request body: %v", err)
	}
	if len(body) == 0 {
		return nil, badRequest("empty request body: want an AdmissionReview")
	}
	// What the review decodes into, charged before it is: the objects are
	// copied as they are, but a map or list elsewhere (userInfo.extra, say)
	// may decode into many times its size.
	est, err := jsonscan.Scan(body, reviewType(), 0)
	if err != nil {
		return nil, badRequest("decode AdmissionReview: %v", err)
	}
	if err := st.reserve(est.Bytes); err != nil {
		if errors.Is(err, ErrOverBudget) {
			return nil, &reviewError{http.StatusRequestEntityTooLarge, fmt.Sprintf("decode AdmissionReview: %v", err)}
		}
		return nil, &reviewError{http.StatusTooManyRequests, err.Error()}
	}
	// As the kube-apiserver decodes: field names match case-sensitively.
	// The scan has validated the body, so this reads it once more, not
	// twice (see decodeReview).
	review, err := decodeReview(body, est.Marked)
	if err != nil {
		return nil, badRequest("decode AdmissionReview: %v", err)
	}
	if rerr := checkReview(review); rerr != nil {
		return nil, rerr
	}
	return review, nil
}

// checkReview refuses a decoded review bindkit cannot answer: another
// apiVersion or kind, no request, or a request without the uid its
// answer must carry.
func checkReview(review *admissionv1.AdmissionReview) *reviewError {
	switch {
	case review.APIVersion != admissionV1 && review.APIVersion != admissionV1beta1:
		return badRequest("AdmissionReview apiVersion %q not supported: want %s or %s", review.APIVersion, admissionV1, admissionV1beta1)
	case review.Kind != reviewKind:
		return badRequest("kind %q is not %s", review.Kind, reviewKind)
	case review.Request == nil:
		return badRequest("AdmissionReview has no request")
	case review.Request.UID == "":
		return badRequest("AdmissionReview request has no uid")
	}
	return nil
}

// bodyPacer moves a connection's read deadline as its body arrives:
// ReadHeaderTimeout from the body's start plus a second for every
// MinBodyRate bytes in, never past the request's read timeout, and makes
// the connection due then (see connLimiter). Errors setting the deadline
// mean the connection cannot take one (HTTP/2 without support), which
// leaves the server's ReadTimeout. A nil *bodyPacer does nothing.
type bodyPacer struct {
	rc           *http.ResponseController
	c            *trackedConn // nil outside Serve
	start        time.Time
	grace, limit time.Duration
	rate         float64
}

func (s *Server) newBodyPacer(w http.ResponseWriter, r *http.Request, readTimeout time.Duration) bodyPacer {
	return bodyPacer{
		rc:    http.NewResponseController(w),
		c:     connFrom(r.Context()),
		start: time.Now(),
		grace: s.opts.ReadHeaderTimeout,
		limit: readTimeout,
		rate:  float64(s.opts.MinBodyRate),
	}
}

// pace sets the deadline n bytes of the body have earned.
func (p *bodyPacer) pace(n int64) {
	if p == nil {
		return
	}
	earned := min(p.grace+time.Duration(float64(n)/p.rate*float64(time.Second)), p.limit)
	d := p.start.Add(earned)
	if p.rc != nil && p.rc.SetReadDeadline(d) != nil {
		p.rc = nil // no deadlines on this connection: do not ask again
	}
	if p.c != nil {
		p.c.l.setDue(p.c, d)
	}
}

// drain reads what is left of a body the server refuses for now (429)
// into nothing, at the pace the body must keep (read bytes so far), so
// that the client reads the answer: net/http closes a connection whose
// unread body is over 256 KiB, and a client still writing the body is
// then reset, often before it reads the 429. The kube-apiserver retries
// a 429 with Retry-After, but fails the admission on a reset.
func drain(r io.Reader, read int64, pacer *bodyPacer) {
	buf := make([]byte, 8<<10) // small: refusals come in floods

	for {
		n, err := r.Read(buf)
		read += int64(n)
		if err != nil {
			return
		}
		pacer.pace(read)
	}
}

// readBody reads r to its end, charging reserve for each buffer before it
// is allocated: the buffer and, for the review decoded from it later, as
// much again. The buffer starts small and grows fourfold, up to the
// announced length (contentLength, -1 when unknown) or just past limit, so
// what is charged follows what arrived. After each read that brings bytes
// it tells pacer how many have arrived.
func readBody(r io.Reader, contentLength, limit int64, reserve func(int64) error, pacer *bodyPacer) ([]byte, error) {
	end := limit + 1 // one byte more, so MaxBytesReader reports a body too long
	if contentLength >= 0 {
		end = contentLength
	}
	size := min(end, firstBodyChunk)
	if err := reserve(2 * size); err != nil {
		return nil, err
	}
	// Each buffer holds room bytes and one more, where the byte that
	// tells a full buffer from a body that goes on is read: no probe
	// allocated apart for every body.
	room := size
	buf := make([]byte, 0, room+1)
	for {
		if int64(len(buf)) < room {
			n, err := r.Read(buf[len(buf):room])
			buf = buf[:len(buf)+n]
			if n > 0 && err == nil {
				pacer.pace(int64(len(buf)))
			}
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return buf, err
			}
			continue
		}
		// Full: grow only for a body that goes on.
		n, err := r.Read(buf[len(buf) : len(buf)+1])
		if n == 0 {
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return buf, err
			}
			continue
		}
		pacer.pace(int64(len(buf)) + 1)
		grown := min(4*max(room, 1), max(end, room+1))
		if contentLength >= 0 {
			// An announced body that has filled its first chunk is
			// charged whole at once: bodies that grew their charge four
			// times over as they arrived could each hold part of the
			// budget until none could finish, and all were refused (32
			// bodies of 6 MiB at once, under load). A stalled body still
			// holds only its first chunk.
			grown = max(end, room+1)
		}
		// The outgrown buffer stays charged: it is garbage until collected.
		if err := reserve(grown + (grown - room)); err != nil {
			return nil, err
		}
		next := make([]byte, len(buf)+1, grown+1)
		copy(next, buf[:len(buf)+1])
		buf, room = next, grown
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// admit calls the controller, turning a panic into a logged failure so one
// bad object cannot take the webhook down for every other.
func (s *Server) admit(ctx context.Context, rt *route, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.logger.Error("admission controller panicked",
				zap.String("path", rt.ctrl.Path()),
				zap.String("uid", string(req.UID)),
				zap.String("kind", req.Kind.Kind),
				zap.String("namespace", req.Namespace),
				zap.String("name", req.Name),
				zap.String("operation", string(req.Operation)),
				zap.Any("panic", v),
				zap.ByteString("stack", debug.Stack()),
			)
			resp, panicked = nil, true
		}
	}()
	return rt.ctrl.Admit(ctx, req), false
}

// timeoutParam reads the ?timeout= the kube-apiserver adds from the
// webhook's timeoutSeconds, so a controller stops working on a request the
// caller has given up on.
func timeoutParam(u *url.URL) (time.Duration, bool) {
	if u.RawQuery == "" {
		return 0, false
	}
	d, err := time.ParseDuration(u.Query().Get("timeout"))
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

func objectName(req *admissionv1.AdmissionRequest) string {
	if req.Namespace == "" {
		return req.Name
	}
	return req.Namespace + "/" + req.Name
}
