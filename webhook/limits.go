package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of ObjectLimits.
const (
	// DefaultMaxObjectDepth is far deeper than any workload (a Deployment
	// nests about 15 levels) and far shallower than a nesting bomb.
	DefaultMaxObjectDepth = 100
	// DefaultMaxContainers bounds each of a pod's containers,
	// initContainers and ephemeralContainers.
	DefaultMaxContainers = 256
	// DefaultMaxVolumes bounds a pod's volumes.
	DefaultMaxVolumes = 1024
	// DefaultMaxEnv bounds each container's env, and its envFrom.
	DefaultMaxEnv = 4096
	// DefaultMaxVolumeMounts bounds each container's volumeMounts.
	DefaultMaxVolumeMounts = 1024
	// DefaultMaxPatchBytes bounds the JSON patch of one answer, a third of
	// the kube-apiserver's 3 MiB request limit.
	DefaultMaxPatchBytes = 1 << 20
)

// ObjectLimits bound the object of one admission request. The server hands
// them to every controller in the request's context (ObjectLimitsFrom); a
// controller that decodes the object checks them before it decodes and
// refuses an object beyond one with a 413 that names the limit. Zero fields
// take the defaults above; a negative field is an error at New.
type ObjectLimits struct {
	// MaxDepth bounds the nesting of objects and arrays in the object
	// (default DefaultMaxObjectDepth).
	MaxDepth int
	// MaxContainers bounds each list of containers of the pod template
	// (default DefaultMaxContainers).
	MaxContainers int
	// MaxVolumes bounds the pod template's volumes (default DefaultMaxVolumes).
	MaxVolumes int
	// MaxEnv bounds the env, and the envFrom, of each container
	// (default DefaultMaxEnv).
	MaxEnv int
	// MaxVolumeMounts bounds the volumeMounts of each container
	// (default DefaultMaxVolumeMounts).
	MaxVolumeMounts int
	// MaxPatchBytes bounds the JSON patch a controller answers with
	// (default DefaultMaxPatchBytes).
	MaxPatchBytes int64
}

// DefaultObjectLimits returns ObjectLimits with every default filled in.
func DefaultObjectLimits() ObjectLimits {
	return ObjectLimits{
		MaxDepth:        DefaultMaxObjectDepth,
		MaxContainers:   DefaultMaxContainers,
		MaxVolumes:      DefaultMaxVolumes,
		MaxEnv:          DefaultMaxEnv,
		MaxVolumeMounts: DefaultMaxVolumeMounts,
		MaxPatchBytes:   DefaultMaxPatchBytes,
	}
}

func (l ObjectLimits) withDefaults() (ObjectLimits, error) {
	d := DefaultObjectLimits()
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxDepth", &l.MaxDepth, d.MaxDepth},
		{"MaxContainers", &l.MaxContainers, d.MaxContainers},
		{"MaxVolumes", &l.MaxVolumes, d.MaxVolumes},
		{"MaxEnv", &l.MaxEnv, d.MaxEnv},
		{"MaxVolumeMounts", &l.MaxVolumeMounts, d.MaxVolumeMounts},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			return l, fmt.Errorf("webhook: ObjectLimits.%s %d is negative", f.name, *f.v)
		}
	}
	switch {
	case l.MaxPatchBytes == 0:
		l.MaxPatchBytes = d.MaxPatchBytes
	case l.MaxPatchBytes < 0:
		return l, fmt.Errorf("webhook: ObjectLimits.MaxPatchBytes %d is negative", l.MaxPatchBytes)
	}
	if l.MaxDepth > maxJSONDepth {
		return l, fmt.Errorf("webhook: ObjectLimits.MaxDepth %d is more than %d, the JSON decoder's own limit", l.MaxDepth, maxJSONDepth)
	}
	return l, nil
}

// maxJSONDepth is encoding/json's nesting limit, and the kube-apiserver's.
const maxJSONDepth = 10000

// requestState is what the server keeps in a request's context for the
// controller: the limits and the request's share of the memory budget.
type requestState struct {
	limits   *ObjectLimits
	names    map[string]string
	budget   *memoryBudget
	reserved atomic.Int64
	// untouched is set by Untouched: the controller left the request
	// alone, for the Observer.
	untouched atomic.Bool
}

type requestStateKey struct{}

func withRequestState(ctx context.Context, st *requestState) context.Context {
	return context.WithValue(ctx, requestStateKey{}, st)
}

func stateFrom(ctx context.Context) *requestState {
	st, _ := ctx.Value(requestStateKey{}).(*requestState)
	return st
}

// ObjectLimitsFrom returns the ObjectLimits of the server handling the
// request behind ctx, or DefaultObjectLimits outside a server (a test
// calling a controller directly, say).
func ObjectLimitsFrom(ctx context.Context) ObjectLimits {
	if st := stateFrom(ctx); st != nil {
		return *st.limits
	}
	return DefaultObjectLimits()
}

// SettingNameFrom names an Options field (as Options.SettingName does,
// for example "ObjectLimits.MaxPatchBytes") the way the server handling
// the request behind ctx names it, so a controller's refusal names the
// setting its user changes (through sharedmain, the flag); outside a
// server it is "Options.<field>".
func SettingNameFrom(ctx context.Context, field string) string {
	var o Options
	if st := stateFrom(ctx); st != nil {
		o.SettingNames = st.names
	}
	return o.SettingName(field)
}

// WithObjectLimits returns a copy of ctx carrying limits, as the contexts
// the server passes to controllers do (zero fields take their defaults). A
// test of an Admitter calls it to check the controller's
// limits; Reserve is free in such a context. Limits New would refuse
// (negative ones) are replaced by DefaultObjectLimits.
func WithObjectLimits(ctx context.Context, limits ObjectLimits) context.Context {
	l, err := limits.withDefaults()
	if err != nil {
		l = DefaultObjectLimits()
	}
	return withRequestState(ctx, &requestState{limits: &l})
}

// ErrOverloaded is wrapped by Reserve's error when the memory budget has no
// room now; a controller answers with Overloaded, and the caller retries.
var ErrOverloaded = errors.New("webhook overloaded")

// ErrOverBudget is wrapped by Reserve's error when the request would hold
// more than the whole memory budget: it can never be admitted, so the
// controller refuses it (a 413) rather than asking for a retry.
var ErrOverBudget = errors.New("more than the webhook's memory budget")

// Reserve charges bytes, an estimate of memory the controller is about to
// allocate for the request behind ctx, to the server's memory budget for
// admissions in flight (Options.MaxInFlightMemory). The server releases it
// when the request is answered. It returns nil outside a server. It never
// waits: with no room now it returns an error wrapping ErrOverloaded, and
// for a request that would alone hold more than the whole budget, one
// wrapping ErrOverBudget. Both errors name the budget and its flag.
func Reserve(ctx context.Context, bytes int64) error {
	st := stateFrom(ctx)
	if st == nil || st.budget == nil || bytes <= 0 {
		return nil
	}
	return st.reserve(bytes)
}

func (st *requestState) reserve(bytes int64) error {
	b := st.budget
	if held := st.reserved.Load(); held+bytes > b.limit {
		return fmt.Errorf("%w: needs an estimated %s, more than the webhook's memory budget of %s (%s)",
			ErrOverBudget, formatBytes(held+bytes), formatBytes(b.limit), b.setting)
	}
	if !b.tryAcquire(bytes) {
		return fmt.Errorf("%w: admissions in flight hold %s of its %s memory budget (%s); retry",
			ErrOverloaded, formatBytes(b.used.Load()), formatBytes(b.limit), b.setting)
	}
	st.reserved.Add(bytes)
	return nil
}

// release gives back everything the request reserved.
func (st *requestState) release() {
	st.budget.release(st.reserved.Swap(0))
}

// memoryBudget is a non-blocking weighted semaphore over estimated bytes.
type memoryBudget struct {
	limit int64
	// setting names the budget's setting in errors (Options.SettingName).
	setting string
	used    atomic.Int64
}

func (b *memoryBudget) tryAcquire(n int64) bool {
	for {
		cur := b.used.Load()
		if cur+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *memoryBudget) release(n int64) { b.used.Add(-n) }

// formatBytes writes n in the Kubernetes quantity form flags accept: 48Mi.
func formatBytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Overloaded returns a response for a request the controller cannot take
// now (Reserve failed with ErrOverloaded). The server answers it, like any
// response whose Result.Code is 429, with HTTP 429 Too Many Requests and a
// Retry-After header instead of an AdmissionReview, so the kube-apiserver
// retries the call within its timeout rather than failing the user's
// request at once.
func Overloaded(err error) *admissionv1.AdmissionResponse {
	msg := "webhook overloaded; retry"
	if err != nil {
		msg = err.Error()
	}
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusTooManyRequests,
			Reason:  metav1.StatusReasonTooManyRequests,
			Message: msg,
		},
	}
}
