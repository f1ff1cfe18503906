package psbinding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

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

// patchSubjects applies the work to each subject, with at most
// PatchConcurrency patches of the reconciler in flight (its concurrent
// reconciles share them), and joins the errors. A subject that has no pod template, or
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
	p := &patchRun{sem: r.slots()}
	start := func(w work, first *observed, lock *subjectLock) {
		p.sem <- struct{}{}
		p.wg.Go(func() {
			defer func() { r.subjectLocks.unlock(lock); <-p.sem }()
			err := r.patchSubject(ctx, mctx, b, s, w, first)
			switch {
			case err != nil:
				p.fail(err)
			case w.bind:
				p.bound.Add(1)
			}
		})
	}
	// A subject another reconcile is patching is patched after the rest,
	// rather than waited for in turn: reconciles of Bindings that select
	// the same subjects spread over them instead of queueing at each.
	var later []work
	patch := func(w work, first *observed) {
		if lock, ok := r.subjectLocks.tryLock(s.key(w.name)); ok {
			start(w, first, lock)
			return
		}
		later = append(later, w)
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
	for _, w := range later {
		if ctx.Err() != nil {
			break
		}
		start(w, nil, r.subjectLocks.lock(s.key(w.name)))
	}
	p.wg.Wait()
	if err := ctx.Err(); err != nil {
		p.fail(fmt.Errorf("%s: stopped before every subject was patched: %w", describe(b), err))
	}
	return int(p.bound.Load()), classify(b, p.errs)
}

// slots returns the reconciler's patch slots, made at the first call.
func (r *BaseReconciler) slots() chan struct{} {
	r.slotsOnce.Do(func() { r.patchSlots = make(chan struct{}, cmp.Or(r.PatchConcurrency, DefaultPatchConcurrency)) })
	return r.patchSlots
}

// patchRun is one patchSubjects call's subjects in flight and their errors.
type patchRun struct {
	sem  chan struct{} // the reconciler's slots: one per patch in flight
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
// flight, so at most about two pages and PatchConcurrency objects are held
// at once. It returns the work no page held (unbinds, subjects created or
// relabelled since the cache saw them, everything after a failed LIST),
// which the caller reads one by one: a failed LIST loses nothing. The next
// page is read while the last one's subjects are patched (listPages).
func (r *BaseReconciler) patchListed(ctx context.Context, s *subject, todo []work, patch func(work, *observed)) []work {
	sel, err := s.ref.LabelSelector()
	if err != nil {
		return todo
	}
	pending := make(map[string]work, len(todo))
	for _, w := range todo {
		if w.bind {
			pending[w.name] = w
		}
	}
	for page := range r.listPages(ctx, s, sel.String()) {
		for _, item := range page {
			w, ok := pending[item.name]
			if !ok {
				continue
			}
			delete(pending, item.name)
			patch(w, item.obj) // the work as it is: its paced change and rollback too
		}
		if len(pending) == 0 {
			break
		}
	}
	var rest []work
	for _, w := range todo {
		if _, ok := pending[w.name]; !w.bind || ok {
			rest = append(rest, w)
		}
	}
	return rest
}

// listPages lists s's selector page by page, one page ahead of the caller:
// the next page is read while the caller patches the subjects of the last,
// so the patches in flight do not run dry during a LIST's round trip. At
// most two pages are held at once. The pages end at the last one, at the
// first failure (an expired continue token, say: the caller reads what no
// page held one by one), or when ctx ends; a caller that stops early
// loses nothing and leaves no goroutine behind. A dynamic client whose
// resources are duck.RawListers (duck.NewDynamicClient's) gives the items
// as JSON (observed).
func (r *BaseReconciler) listPages(ctx context.Context, s *subject, selector string) iter.Seq[[]listed] {
	return func(yield func([]listed) bool) {
		ctx, cancel := context.WithCancel(ctx)
		pages := make(chan []listed) // unbuffered: one page read ahead, no more
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() {
			defer close(done)
			defer close(pages)
			client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
			opts := metav1.ListOptions{LabelSelector: selector, Limit: listPageSize}
			for ctx.Err() == nil {
				page, next, err := listPage(ctx, client, opts)
				if err != nil {
					return
				}
				select {
				case pages <- page:
				case <-ctx.Done():
					return
				}
				if opts.Continue = next; opts.Continue == "" {
					return
				}
			}
		}()
		for page := range pages {
			if !yield(page) {
				return
			}
		}
	}
}

// listed is a subject a LIST page held.
type listed struct {
	name string
	obj  *observed
}

// listPage reads one page of client's LIST and returns its subjects and
// the continue token of the next.
func listPage(ctx context.Context, client dynamic.ResourceInterface, opts metav1.ListOptions) ([]listed, string, error) {
	if raw, ok := client.(duck.RawLister); ok {
		page, err := raw.ListRaw(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		items := make([]listed, len(page.Items))
		for i, item := range page.Items {
			items[i] = listed{name: item.Name, obj: &observed{raw: item.JSON, typed: item.Object, apiVersion: page.APIVersion, kind: page.Kind}}
		}
		return items, page.Continue, nil
	}
	page, err := client.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	items := make([]listed, len(page.Items))
	for i := range page.Items {
		items[i] = listed{name: page.Items[i].GetName(), obj: &observed{u: &page.Items[i]}}
	}
	return items, page.GetContinue(), nil
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
	for _, err := range errs {
		if _, ok := errors.AsType[*PanicError](err); ok {
			// Retried with the work queue's capped backoff: the panic may
			// depend on the subject, which may change.
			return unavailable(ReasonBindingPanicked, joined, joined)
		}
	}
	for _, reason := range []string{ReasonSubjectHasNoPodTemplate, ReasonSubjectUnreadable} {
		for _, err := range errs {
			if u, ok := errors.AsType[*unavailableError](err); ok && u.reason == reason {
				// Retrying cannot help; a change to the subject reconciles
				// the Binding again through the tracker.
				return unavailable(reason, joined, nil)
			}
		}
	}
	for _, reason := range []string{ReasonDoNotIdempotent, ReasonUndoNotRestoring} {
		for _, err := range errs {
			if u, ok := errors.AsType[*unavailableError](err); ok && u.reason == reason {
				return unavailable(reason, joined, joined)
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
	// Panics first: a condition quoting three subjects names the panic.
	rank := func(err error) int {
		if _, ok := errors.AsType[*PanicError](err); ok {
			return 0
		}
		return 1
	}
	sorted := slices.SortedFunc(slices.Values(errs), func(a, b error) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Error(), b.Error()))
	})
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
// as safe as a stale read), unless this process patched the subject
// recently (subjectLocks). The caller holds the subject's lock.
func (r *BaseReconciler) patchSubject(ctx, mctx context.Context, b Bindable, s *subject, w work, first *observed) error {
	client := r.DynamicClient.Resource(s.gvr).Namespace(s.ref.Namespace)
	subjectName := fmt.Sprintf("%s %s/%s", s.gvr.GroupResource(), s.ref.Namespace, w.name)
	name := fmt.Sprintf("%s: subject %s", describe(b), subjectName)
	by := r.boundBy(b)
	observer := r.observerIn(ctx)
	wait := firstPatchWait
	var (
		lastRejected string // resourceVersion of the last object whose patch was refused
		lastRefusal  error  // the API server's answer to it
	)
	fresh := r.subjectLocks.patchedRecently(s.key(w.name), time.Now())
	if fresh {
		first = nil // maybe patched since it was listed: read it from etcd
	}
	for attempt := 1; ; attempt++ {
		o, err := first, error(nil)
		if o == nil {
			var u *unstructured.Unstructured
			u, err = readSubject(ctx, client, w.name, attempt == 1 && !fresh)
			o = &observed{u: u}
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: read: %w", name, err)
		}
		before, err := o.pod(s.shape)
		if o.deleting(before) {
			return nil
		}
		if err != nil {
			return readError(name, s, err)
		}
		if r.carriedAlready(mctx, b, by, s, w, before) {
			return nil // its record of an earlier generation holds: no write
		}
		resourceVersion := before.ResourceVersion
		pl, err := r.planWithCompanions(mctx, b, by, s, w, o, before, lastRejected == "")
		if _, ok := errors.AsType[*PanicError](err); ok {
			return nameSubject(err, subjectName)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if lastRejected != "" && resourceVersion == lastRejected {
			// Refused although nothing changed: the patch itself is wrong.
			return refused(name, s.shape, pl.app, pl.before, pl.after, lastRefusal)
		}
		if len(pl.ops) == 0 {
			return nil
		}
		body, err := guardedPatch(o, pl.ops)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		err = r.sendPatch(ctx, s, w.name, body)
		switch {
		case err == nil:
			r.subjectLocks.patched(s.key(w.name), time.Now())
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
		lastRejected, lastRefusal, first = resourceVersion, err, nil
		if err := sleepJittered(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		wait = min(2*wait, maxPatchWait)
	}
}

// sleepJittered waits between half of wait and wait, at random, so that
// writers that conflicted do not retry in step; it returns ctx's error if
// ctx ends first.
func sleepJittered(ctx context.Context, wait time.Duration) error {
	t := time.NewTimer(wait/2 + rand.N(wait/2+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// planWithCompanions is planPatch with the subject's companions
// (companionApps) when withCompanions (not after a refused patch), or
// without them when planning with them fails: a companion's failure is
// its own reconcile's to report.
func (r *BaseReconciler) planWithCompanions(mctx context.Context, b Bindable, by duck.BoundBy, s *subject, w work, o *observed, before *duck.WithPod, withCompanions bool) (plannedPatch, error) {
	var companions []application
	if withCompanions {
		companions = r.companionApps(mctx, b, s, w, before)
	}
	pl, err := planPatch(mctx, b, by, s, w, o, before, companions)
	if err != nil && len(companions) > 0 {
		return planPatch(mctx, b, by, s, w, o, before, nil)
	}
	return pl, err
}

// plannedPatch is what one work does to one subject as read: its pod
// template before and after, the JSON patch between them (the records
// of the change included), and the application whose outcome it is.
type plannedPatch struct {
	before, after *duck.WithPod
	ops           []jsonpatch.JsonPatchOperation
	app           application
}

// planPatch computes what w does to the subject o, read as before, that
// records b as by: Do or Undo on its pod template, and the records of the
// change in the same patch. An unbinding of a subject that does not carry
// b (only b's hold or rollout records) removes the records and runs no
// Undo. The companions' changes (companionApps) go first, in the same
// patch. A *PanicError is the Binding's code's.
func planPatch(mctx context.Context, b Bindable, by duck.BoundBy, s *subject, w work, o *observed, before *duck.WithPod, companions []application) (plannedPatch, error) {
	var err error
	apps := append(companions[:len(companions):len(companions)], applications(mctx, b, by, w, true)...)
	pl := plannedPatch{before: before, after: before, app: apps[len(apps)-1]}
	if _, recorded := duck.BoundGeneration(before.Annotations, by); w.bind || recorded || newerBound(before.Annotations, by) {
		if pl.after, pl.ops, err = bindingStep(s.shape, before, apps...); err != nil {
			return plannedPatch{}, err
		}
	}
	marked, err := recordChange(s.shape, o, by, b.GetGeneration(), w, before, pl.after)
	if err != nil || marked == pl.after {
		return pl, err
	}
	pl.after = marked
	if pl.ops, err = s.shape.CreatePatch(before, marked); err != nil {
		return plannedPatch{}, fmt.Errorf("create patch: %w", err)
	}
	return pl, nil
}

// newerBound reports whether the subject's bound record names by in a
// newer format than this bindkit's (duck.RecordFormat): it carries b's
// change, which unbinding undoes, as it would one of this format.
func newerBound(annotations map[string]string, by duck.BoundBy) bool {
	return slices.Contains(duck.NewerRecords(annotations, by), duck.BoundAnnotation)
}

// guardedPatch is ops, guarded against the subject as o read it
// (duck.Guard), as the body of a JSON patch.
func guardedPatch(o *observed, ops []jsonpatch.JsonPatchOperation) ([]byte, error) {
	guarded, err := o.guard(ops)
	if err != nil {
		return nil, err
	}
	return duck.MarshalPatch(guarded)
}

// readSubject reads subject name. A cached read is served from the
// kube-apiserver's cache (resourceVersion "0"): no quorum read of etcd. It
// may be a moment behind; the guard makes that as safe as any stale read,
// and a guard that fails reads again from etcd. A cache that does not
// hold the subject yet (another kube-apiserver's than the informer's, say)
// is not believed: etcd is asked.
func readSubject(ctx context.Context, client dynamic.ResourceInterface, name string, cached bool) (*unstructured.Unstructured, error) {
	if cached {
		u, err := client.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		if !apierrors.IsNotFound(err) {
			return u, err
		}
	}
	return client.Get(ctx, name, metav1.GetOptions{})
}

// applications are what w does to a subject that records b as by: b's
// Do (or Undo), and, when w undoes another generation of b (w.undo), that
// generation's Undo first (or, for an unbinding, instead). record says
// whether the binding step records the outcome in the bound record.
func applications(mctx context.Context, b Bindable, by duck.BoundBy, w work, record bool) []application {
	app := application{b: b, ctx: mctx, bind: w.bind, by: by, record: record}
	switch {
	case w.undo == nil:
		return []application{app}
	case w.bind:
		return []application{{b: w.undo, ctx: mctx, by: by}, app}
	}
	app.b = w.undo
	return []application{app}
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

// Reasons of a subject patch the API server refused with the subject
// unchanged, when the reconciler can tell why from the objects it holds.
const (
	// ReasonDoNotIdempotent: Do, run again on its own result, changes it
	// again (it appends rather than sets, say), so the patch it makes is
	// refused (a duplicate container) or would grow the subject at every
	// admission.
	ReasonDoNotIdempotent = "DoNotIdempotent"
	// ReasonUndoNotRestoring: Undo, run on a subject Do bound, does not
	// take back what Do changed, or changes it again when run twice.
	ReasonUndoNotRestoring = "UndoNotRestoring"
)

// maxAPIMessage bounds the API server's message quoted in a condition and
// an event: the kube-apiserver lists every field cause, and a Binding that
// adds a hundred invalid env vars must not write a condition of a hundred
// lines.
const maxAPIMessage = 512

// refused reports a patch the API server refused twice with the subject
// unchanged, quoting its answer (the status reason and the field causes).
// When the objects the reconciler holds show why (a Do that is not
// idempotent, an Undo that does not restore), the error says so with a
// reason of its own; otherwise it is a SubjectPatchFailed. The error is an
// *unavailableError that is not retried: the same Do makes the same patch,
// and a change of the subject or the Binding reconciles it again.
func refused(name string, shape duck.Shape, app application, before, after *duck.WithPod, apiErr error) error {
	msg := fmt.Sprintf("%s: patch refused by the API server with the subject unchanged: %s", name, apiMessage(apiErr))
	if why := misbehaviour(shape, app, before, after); why != "" {
		reason := ReasonDoNotIdempotent
		if !app.bind {
			reason = ReasonUndoNotRestoring
		}
		err := fmt.Errorf("%s: %s", msg, why)
		return unavailable(reason, err, err)
	}
	err := errors.New(msg)
	return unavailable(ReasonSubjectPatchFailed, err, err)
}

// misbehaviour says, when it can, how app's Do or Undo breaks the Bindable
// contract on this subject: Do run again on after changes it again, or
// Undo run again does, or Do after Undo does not give before back. A panic
// of the second run counts as no finding: the first run did not panic, and
// the refusal is reported as it is.
func misbehaviour(shape duck.Shape, app application, before, after *duck.WithPod) string {
	again, ops, err := bindingStep(shape, after, app)
	if err != nil {
		return ""
	}
	if len(ops) > 0 {
		call := "Do"
		if !app.bind {
			call = "Undo"
		}
		return fmt.Sprintf("%s is not idempotent: run again on its own result it changes %s", call, opPaths(ops))
	}
	if app.bind {
		return ""
	}
	// Undo: Do on the unbound subject should give the bound one back (the
	// bound record aside).
	redo := app
	redo.bind, redo.record = true, false
	rebound, _, err := bindingStep(shape, again, redo)
	if err != nil {
		return ""
	}
	rebound.Annotations, before = nil, before.DeepCopy()
	before.Annotations = nil
	if ops, err := shape.CreatePatch(before, rebound); err == nil && len(ops) > 0 {
		return fmt.Sprintf("Undo does not restore what Do changed: Do on Undo's result differs from the bound subject at %s", opPaths(ops))
	}
	return ""
}

// opPaths lists the paths of up to three operations.
func opPaths(ops []jsonpatch.JsonPatchOperation) string {
	const shown = 3
	paths := make([]string, 0, shown)
	for _, op := range ops[:min(len(ops), shown)] {
		paths = append(paths, op.Path)
	}
	out := strings.Join(paths, ", ")
	if len(ops) > shown {
		out += fmt.Sprintf(" and %d more", len(ops)-shown)
	}
	return out
}

// apiMessage is what the API server said about a refused request: its
// status code and reason, and its message, which lists the field causes;
// the causes the message does not already name are added. It is cut at
// maxAPIMessage bytes.
func apiMessage(err error) string {
	if err == nil {
		return "no answer recorded"
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return truncate(err.Error(), maxAPIMessage)
	}
	st := status.Status()
	msg := fmt.Sprintf("%d %s: %s", st.Code, st.Reason, st.Message)
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Field != "" && !strings.Contains(st.Message, c.Field) {
				msg += fmt.Sprintf("; %s: %s", c.Field, c.Message)
			}
		}
	}
	return truncate(msg, maxAPIMessage)
}

// truncate cuts s at n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " [...]"
}
