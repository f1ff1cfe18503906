package psbinding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
)

// Retries of one subject's patch whose guard failed because another client
// changed what the patch depends on: each attempt reads the subject again,
// after a jittered, doubling wait. Against a client that edits the same
// fields ten times a second, an attempt fails with the odds of an edit
// landing between its read and its write, a few in a hundred; the budget
// makes a subject that still conflicts a requeue of the Binding, not an
// error.
const (
	maxPatchAttempts = 10
	firstPatchWait   = 10 * time.Millisecond
	maxPatchWait     = time.Second
)

// patchSubjects applies the work to each subject, at most PatchConcurrency
// at a time, and joins the errors. A subject that has no pod template, or
// cannot be read as one, is an *unavailableError: its reason goes in the
// Ready condition. bound counts the bind work that succeeded.
//
// When a selector's reconcile has many subjects to bind, it reads them with
// paged LISTs of the selector rather than one GET each (see patchListed);
// what the pages do not hold is read one by one.
func (r *BaseReconciler) patchSubjects(ctx, mctx context.Context, b Bindable, s *subject, todo []work) (bound int, _ error) {
	if len(todo) == 0 {
		return 0, nil
	}
	p := &patchRun{sem: make(chan struct{}, cmp.Or(r.PatchConcurrency, DefaultPatchConcurrency))}
	patch := func(w work, first *unstructured.Unstructured) {
		p.sem <- struct{}{}
		p.wg.Go(func() {
			defer func() { <-p.sem }()
			err := r.patchSubject(ctx, mctx, b, s, w, first)
			switch {
			case err != nil:
				p.fail(err)
			case w.bind:
				p.bound.Add(1)
			}
		})
	}
	rest := todo
	if s.ref.Selector != nil && binds(todo) >= listThreshold {
		rest = r.patchListed(ctx, s, todo, patch)
	}
	for _, w := range rest {
		if ctx.Err() != nil {
			break // demoted or shutting down: no new writes
		}
		patch(w, nil)
	}
	p.wg.Wait()
	if err := ctx.Err(); err != nil {
		p.fail(fmt.Errorf("%s: stopped before every subject was patched: %w", describe(b), err))
	}
	return int(p.bound.Load()), classify(b, p.errs)
}

// patchRun is one patchSubjects call's subjects in flight and their errors.
type patchRun struct {
	sem  chan struct{} // a slot per patch in flight
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
	// bound counts the bind work that succeeded.
	bound atomic.Int64
}

func (p *patchRun) fail(err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// A reconcile that binds at least listThreshold subjects of a selector
// reads them listPageSize at a time with LISTs of the selector: a thousand
// GETs, each a quorum read of etcd and a response to decode, become ten
// LISTs.
const (
	listThreshold = 32
	listPageSize  = 100
)

// binds counts the work that binds.
func binds(todo []work) int {
	n := 0
	for _, w := range todo {
		if w.bind {
			n++
		}
	}
	return n
}

// patchListed lists s's selector page by page and hands each listed
// subject that todo binds to patch, with the listed object as the one its
// first attempt patches. patch blocks while PatchConcurrency patches are in
// flight, so at most about a page and PatchConcurrency objects are held at
// once. It returns the work no page held (unbinds, subjects created or
// relabelled since the cache saw them, everything after a failed LIST),
// which the caller reads one by one: a failed LIST loses nothing.
func (r *BaseReconciler) patchListed(ctx context.Context, s *subject, todo []work, patch func(work, *unstructured.Unstructured)) []work {
	sel, err := s.ref.LabelSelector()
	if err != nil {
		return todo
	}
	pending := make(map[string]bool, len(todo))
	for _, w := range todo {
		if w.bind {
			pending[w.name] = true
		}
	}
	client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: listPageSize}
	for len(pending) > 0 && ctx.Err() == nil {
		page, err := client.List(ctx, opts)
		if err != nil {
			break // an expired continue token, or any failure: GETs finish the work
		}
		for i := range page.Items {
			u := &page.Items[i]
			if !pending[u.GetName()] {
				continue
			}
			delete(pending, u.GetName())
			patch(work{name: u.GetName(), bind: true}, u)
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	var rest []work
	for _, w := range todo {
		if !w.bind || pending[w.name] {
			rest = append(rest, w)
		}
	}
	return rest
}

// classify turns the subjects' errors into what reconcileBinding reports:
// an *unavailableError with the most telling reason (a problem of the
// subject's own before a failed request), a conflict when only conflicts
// remain, nil when there are none.
func classify(b Bindable, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	joined := summarize(errs)
	for _, reason := range []string{ReasonSubjectHasNoPodTemplate, ReasonSubjectUnreadable} {
		for _, err := range errs {
			if u, ok := errors.AsType[*unavailableError](err); ok && u.reason == reason {
				// Retrying cannot help; a change to the subject reconciles
				// the Binding again through the tracker.
				return unavailable(reason, joined, nil)
			}
		}
	}
	for _, err := range errs {
		if !isConflict(err) {
			return unavailable(ReasonSubjectPatchFailed, joined, joined)
		}
	}
	return errs[0]
}

// maxReported is how many subjects' errors a condition message quotes.
const maxReported = 3

// summarize joins errs in a stable order, quoting at most maxReported: the
// message goes into the Ready condition, and one that changed with the
// order patches happened to fail in would be a status write, and a
// reconcile, per attempt.
func summarize(errs []error) error {
	sorted := slices.SortedFunc(slices.Values(errs), func(a, b error) int { return cmp.Compare(a.Error(), b.Error()) })
	if len(sorted) <= maxReported {
		return errors.Join(sorted...)
	}
	return fmt.Errorf("%w\n(and %d more subjects)", errors.Join(sorted[:maxReported]...), len(sorted)-maxReported)
}

// patchSubject binds (w.bind) or unbinds one subject: it reads the full
// object, runs Do or Undo on its pod template, records the outcome in the
// subject's duck.BoundAnnotation, and sends the difference as a JSON patch
// guarded by duck.Guard. When the guard fails because someone changed what
// the patch depends on, it reads the subject again and starts over. A
// subject that is gone is no error. If first is not nil, the first attempt
// patches it instead of reading the subject (the guard makes a stale first
// as safe as a stale read).
func (r *BaseReconciler) patchSubject(ctx, mctx context.Context, b Bindable, s *subject, w work, first *unstructured.Unstructured) error {
	client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
	name := fmt.Sprintf("%s: subject %s %s/%s", describe(b), s.gvr.GroupResource(), s.ref.Namespace, w.name)
	by := r.boundBy(b)
	observer := r.observerIn(ctx)
	wait := firstPatchWait
	var lastRejected string // resourceVersion of the last object whose patch was refused
	for attempt := 1; ; attempt++ {
		u, err := first, error(nil)
		if attempt > 1 || u == nil {
			u, err = client.Get(ctx, w.name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: read: %w", name, err)
		}
		if u.GetDeletionTimestamp() != nil {
			return nil
		}
		if lastRejected != "" && u.GetResourceVersion() == lastRejected {
			// Refused although nothing changed: the patch itself is wrong.
			return fmt.Errorf("%s: patch refused by the API server with the subject unchanged", name)
		}
		before, err := s.shape.FromUnstructured(u)
		if err != nil {
			return readError(name, s, err)
		}
		after := before.DeepCopy()
		if w.bind {
			b.Do(mctx, after)
			duck.MarkBound(after, by, b.GetGeneration())
		} else {
			b.Undo(mctx, after)
			duck.MarkUnbound(after, by)
		}
		ops, err := s.shape.CreatePatch(before, after)
		if err != nil {
			return fmt.Errorf("%s: create patch: %w", name, err)
		}
		if len(ops) == 0 {
			return nil
		}
		guarded, err := duck.Guard(u.Object, ops)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		body, err := duck.MarshalPatch(guarded)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		err = r.sendPatch(ctx, s, w.name, body)
		switch {
		case err == nil:
			observer.SubjectPatched(r.GVR.GroupResource(), w.bind)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) && !apierrors.IsInvalid(err):
			return fmt.Errorf("%s: patch: %w", name, err)
		}
		observer.SubjectConflict(r.GVR.GroupResource())
		if attempt == maxPatchAttempts {
			return &conflictError{what: fmt.Sprintf("%s: still changing after %d attempts", name, attempt), err: err}
		}
		// A failed test comes back as 422 Invalid. If the subject did not
		// change meanwhile, the next read says so and the loop ends above.
		lastRejected = u.GetResourceVersion()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", name, ctx.Err())
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, maxPatchWait)
	}
}

// sendPatch sends a subject's JSON patch, through MetadataClient when set:
// the response, which nothing reads, is then the subject's metadata only.
func (r *BaseReconciler) sendPatch(ctx context.Context, s *subject, name string, body []byte) error {
	opts := metav1.PatchOptions{FieldManager: r.fieldManager(ctx)}
	if r.MetadataClient != nil {
		_, err := r.MetadataClient.Resource(s.gvr).Namespace(s.ref.Namespace).Patch(ctx, name, types.JSONPatchType, body, opts)
		return err
	}
	_, err := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace).Patch(ctx, name, types.JSONPatchType, body, opts)
	return err
}

// readError reports a subject whose object does not give a pod template.
func readError(name string, s *subject, err error) error {
	if errors.Is(err, duck.ErrNoPodTemplate) {
		return unavailable(ReasonSubjectHasNoPodTemplate, fmt.Errorf("%s: %w; declare where %s keeps its pod template with duck.Shapes (TemplateAt)", name, err, s.gvk.Kind), nil)
	}
	return unavailable(ReasonSubjectUnreadable, fmt.Errorf("%s: %w", name, err), nil)
}
