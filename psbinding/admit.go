package psbinding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/webhook"
)

// admitter answers admission requests from the index of the last reconcile.
// Its index is swapped whole, so Admit never waits for a reconcile.
type admitter struct {
	index       atomic.Pointer[index[Bindable]]
	shapes      duck.Shapes
	withContext BindableContext // nil: Do and Undo run in the request's context
	// validate, if set, leaves invalid Bindings out of the index
	// (Settings.Validate).
	validate func(Bindable) error
	// rollout is the kind's default rollout policy (Settings.Rollout).
	rollout *RolloutPolicy
	// excludedNamespaces are never mutated, whatever the webhook
	// configuration says: the namespace the webhook itself runs in, and
	// those Settings.ExcludedNamespaces names.
	excludedNamespaces []string
	// resource is the Bindings' resource, under which Admit records what it
	// applied in the subject's duck.BoundAnnotation; empty until known.
	resource atomic.Pointer[schema.GroupResource]
	// logger receives the stack of a Binding's panic, once per Binding
	// generation (panicsLogged), so a Binding that panics on every request
	// does not flood the log.
	logger       *zap.Logger
	mu           sync.Mutex
	panicsLogged map[string]bool
}

// generationOf is the generation of the Binding p names, 0 if none does.
func generationOf(bindings []Bindable, p *PanicError) int64 {
	for _, b := range bindings {
		if describe(b) == p.Binding {
			return b.GetGeneration()
		}
	}
	return 0
}

// maxPanicsLogged bounds panicsLogged; past it the record starts over.
const maxPanicsLogged = 1024

// panicked answers a request on which a Binding's code panicked: refused
// with the panic's message (Binding, subject, value). The stack goes to the
// log the first time the Binding's generation panics in this process.
func (a *admitter) panicked(p *PanicError, generation int64) *admissionv1.AdmissionResponse {
	key := fmt.Sprintf("%s@%d:%s", p.Binding, generation, p.Call)
	a.mu.Lock()
	first := !a.panicsLogged[key]
	if first {
		if a.panicsLogged == nil || len(a.panicsLogged) >= maxPanicsLogged {
			a.panicsLogged = map[string]bool{}
		}
		a.panicsLogged[key] = true
	}
	a.mu.Unlock()
	if first && a.logger != nil {
		a.logger.Error("binding panicked in admission; further panics of it are answered without a stack in the log",
			zap.String("binding", p.Binding), zap.String("call", p.Call), zap.String("subject", p.Subject),
			zap.Any("panic", p.Value), zap.ByteString("stack", p.Stack))
	}
	return webhook.Errored(http.StatusInternalServerError, p)
}

// boundBy is how b appears in a subject's duck.BoundAnnotation, and whether
// the Bindings' resource is known.
func (a *admitter) boundBy(b Bindable) (duck.BoundBy, bool) {
	gr := a.resource.Load()
	if gr == nil {
		return duck.BoundBy{}, false
	}
	return duck.BoundBy{Resource: *gr, Name: b.GetName(), UID: b.GetUID()}, true
}

// setIndex replaces the index Admit consults and returns the Bindings that
// could not be indexed.
func (a *admitter) setIndex(bindings []Bindable) []error {
	of := indexingBindable
	of.validate = a.validate
	ix, errs := a.index.Load().rebuild(bindings, of)
	a.index.Store(ix)
	return errs
}

// hasIndex reports whether an index has been built, i.e. Admit can decide.
func (a *admitter) hasIndex() bool { return a.index.Load() != nil }

// admit applies every Binding that matches the request's object and answers
// with the JSON patch that results: Do for live Bindings, Undo for Bindings
// being deleted, in the index's deterministic order. Requests it does not
// handle (other operations, subresources, kinds or namespaces no Binding
// names, or no Binding selects) are allowed untouched
// (webhook.Untouched) without decoding the object, at most its metadata.
//
// A matched object is scanned before it is decoded: beyond one of the
// webhook's ObjectLimits it is refused with a 413 naming the limit, and its
// estimated decoded size is reserved from the webhook's memory budget
// (webhook.Reserve). An object without a pod template where its shape looks
// is allowed unchanged, with a warning.
func (a *admitter) admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return webhook.Untouched(ctx)
	}
	if slices.Contains(a.excludedNamespaces, req.Namespace) {
		return webhook.Untouched(ctx)
	}
	ix := a.index.Load()
	if ix == nil {
		return webhook.Errored(http.StatusServiceUnavailable, fmt.Errorf("bindings not listed yet"))
	}
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	if !ix.inScope(gk.Group, gk.Kind, req.Namespace) {
		return webhook.Untouched(ctx)
	}
	limits := webhook.ObjectLimitsFrom(ctx)
	meta, err := decodeObjectMeta(ctx, req.Object.Raw, limits.MaxDepth)
	if err != nil {
		return decodeRefusal(ctx, fmt.Sprintf("%s %s/%s: decode metadata", gk, req.Namespace, req.Name), nil, err)
	}
	if meta.Labels[ProbeLabel] != "" {
		return probeAnswer()
	}
	if meta.Labels[ExcludeLabel] == "true" {
		// The configuration's object selector keeps such objects away; this
		// holds while an edited configuration is being restored.
		return webhook.Untouched(ctx)
	}
	name := req.Name
	if name == "" {
		name = meta.Name
	}
	bindings := ix.lookup(gk.Group, gk.Kind, req.Namespace, name, meta.Labels)
	if len(bindings) == 0 {
		return webhook.Untouched(ctx)
	}

	shape := a.shapes.For(gk)
	before, err := shape.DecodeChecked(req.Object.Raw, limits.MaxDepth, func(st duck.ObjectStats) error {
		if err := checkObjectLimits(ctx, shape, st, limits); err != nil {
			return err
		}
		// Decoding (with its slices' growth) and the copy Do works on.
		return webhook.Reserve(ctx, st.DecodedBytes+st.DecodedBytes/2)
	})
	if err != nil {
		return decodeRefusal(ctx, fmt.Sprintf("%s %s/%s", gk, req.Namespace, name), bindings, err)
	}
	var small [4]application // most requests match few Bindings
	apps := small[:0]
	for _, b := range bindings {
		app := application{ctx: ctx, bind: b.GetDeletionTimestamp() == nil}
		app.by, app.record = a.boundBy(b)
		if a.holdsBack(b, app.by, gk, before) {
			continue
		}
		// The index's Bindings are the informer's: the author's code gets a
		// copy of each Binding it applies, one for WithContext and Do.
		if app.b, err = privateCopy(b); err != nil {
			return a.refuseBinding(b, err)
		}
		app.private = true
		if a.withContext != nil {
			if app.ctx, err = callWithContext(ctx, a.withContext, app.b); err != nil {
				return a.refuseBinding(b, err)
			}
		}
		apps = append(apps, app)
	}
	_, ops, err := bindingStep(shape, before, apps...)
	return a.answer(ctx, gk, req.Namespace, name, bindings, ops, err)
}

// answer is the response to an admission of the subject gk
// namespace/name whose Bindings' step returned ops and err: a panic in
// the author's code refused as such (naming the subject), another error
// as internal, a patch over ObjectLimits.MaxPatchBytes as too large, else
// the patch.
func (a *admitter) answer(ctx context.Context, gk schema.GroupKind, namespace, name string, bindings []Bindable, ops []jsonpatch.JsonPatchOperation, err error) *admissionv1.AdmissionResponse {
	if p, ok := errors.AsType[*PanicError](err); ok {
		p.Subject = fmt.Sprintf("%s %s/%s", gk, namespace, name)
		return a.panicked(p, generationOf(bindings, p))
	}
	if err != nil {
		return webhook.Errored(http.StatusInternalServerError, fmt.Errorf("%s %s/%s: %w", gk, namespace, name, err))
	}
	resp := webhook.PatchResponse(ops)
	if n, limit := int64(len(resp.Patch)), webhook.ObjectLimitsFrom(ctx).MaxPatchBytes; n > limit {
		return webhook.Errored(http.StatusRequestEntityTooLarge, fmt.Errorf("%s: %s %s/%s: patch of %d bytes exceeds the limit of %d bytes (%s)",
			bindingNames(bindings), gk, namespace, name, n, limit, webhook.SettingNameFrom(ctx, "ObjectLimits.MaxPatchBytes")))
	}
	return resp
}

// refuseBinding answers a request on which preparing b for Do failed:
// its WithContext, or the copy of it Do gets, panicked (a *PanicError) or
// returned err.
func (a *admitter) refuseBinding(b Bindable, err error) *admissionv1.AdmissionResponse {
	if p, ok := errors.AsType[*PanicError](err); ok {
		return a.panicked(p, b.GetGeneration())
	}
	return webhook.Denied(fmt.Sprintf("binding %s/%s: %v", b.GetNamespace(), b.GetName(), err))
}

// holdsBack reports whether admission leaves b's part of the subject as
// it is:
//
//   - the subject is held from b's generation (rolled back from its halted
//     rollout);
//   - under a rollout policy, the subject records an earlier generation of
//     b: it keeps what it has (the earlier generation's change stays in its
//     template) until its wave, rather than jumping the queue;
//   - under a rollout policy, the subject does not carry b and b's
//     rollout of its generation is not complete (in progress, or halted):
//     a wave binds it; a halted generation reaches no new subject;
//   - b is being deleted under a policy that paces deletion;
//   - b is paused (RolloutPausedAnnotation), or its generation undone
//     (RolloutUndoAnnotation), and the subject does not carry b's
//     generation: a paused generation, a plan among them, reaches no new
//     subject, and an undone one none at all.
//
// A subject of a kind bound at admission only (bare Pods, Jobs) is never
// held back but by a hold: no rollout can reach it later.
func (a *admitter) holdsBack(b Bindable, by duck.BoundBy, gk schema.GroupKind, subject *duck.WithPod) bool {
	if by.Resource.Empty() {
		return false
	}
	if g, held := duck.HeldOf(subject.Annotations).Lookup(by); held && g == b.GetGeneration() && b.GetDeletionTimestamp() == nil {
		return true
	}
	if b.GetDeletionTimestamp() == nil && duck.NewerRecords(subject.Annotations, by) != nil {
		return true // a newer bindkit's record: left alone (duck.RecordFormat)
	}
	s := Settings{Rollout: a.rollout}
	p, err := s.rolloutPolicy(b)
	if err != nil || !p.Enabled() || slices.Contains(defaultAdmissionOnly, gk) {
		return false
	}
	if b.GetDeletionTimestamp() != nil {
		return p.PaceDeletion
	}
	if gen, recorded := duck.BoundGeneration(subject.Annotations, by); recorded {
		return gen != b.GetGeneration()
	}
	if paused, undo, _ := controlsOf(b); paused || undo {
		return true
	}
	rec, ok := b.GetBindingStatus().(duck.RolloutRecorder)
	return !ok || !rec.GetRollout().Complete(b.GetGeneration())
}

// limitError is an object beyond one of the webhook's ObjectLimits.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// checkObjectLimits compares what Scan counted with the limits. The
// message is built only for an object beyond one.
func checkObjectLimits(ctx context.Context, shape duck.Shape, st duck.ObjectStats, l webhook.ObjectLimits) error {
	var (
		what     string
		n, limit int
		field    string
	)
	switch {
	case st.Containers > l.MaxContainers:
		what, n, limit, field = "containers", st.Containers, l.MaxContainers, "MaxContainers"
	case st.InitContainers > l.MaxContainers:
		what, n, limit, field = "initContainers", st.InitContainers, l.MaxContainers, "MaxContainers"
	case st.EphemeralContainers > l.MaxContainers:
		what, n, limit, field = "ephemeralContainers", st.EphemeralContainers, l.MaxContainers, "MaxContainers"
	case st.Volumes > l.MaxVolumes:
		what, n, limit, field = "volumes", st.Volumes, l.MaxVolumes, "MaxVolumes"
	case st.MaxEnv > l.MaxEnv:
		what, n, limit, field = "env", st.MaxEnv, l.MaxEnv, "MaxEnv"
	case st.MaxVolumeMounts > l.MaxVolumeMounts:
		what, n, limit, field = "volumeMounts", st.MaxVolumeMounts, l.MaxVolumeMounts, "MaxVolumeMounts"
	default:
		return nil
	}
	spec := "spec"
	if p := shape.Path(); p != nil {
		spec = strings.Join(p, ".") + ".spec"
	}
	switch what {
	case "env":
		what = "the env or envFrom of a container of " + spec
	case "volumeMounts":
		what = "the volumeMounts of a container of " + spec
	default:
		what = spec + "." + what
	}
	return &limitError{fmt.Sprintf("%s has %d entries, more than the webhook's limit of %d (%s)", what, n, limit, webhook.SettingNameFrom(ctx, "ObjectLimits."+field))}
}

// decodeRefusal answers an object that did not decode: allowed unchanged
// with a warning when it has no pod template, refused otherwise with the
// code that fits the reason.
func decodeRefusal(ctx context.Context, object string, bindings []Bindable, err error) *admissionv1.AdmissionResponse {
	var limit *limitError
	switch {
	case errors.Is(err, duck.ErrNoPodTemplate):
		resp := webhook.Allowed()
		// The kube-apiserver may cut a warning beyond 256 characters.
		resp.Warnings = []string{fmt.Sprintf("%s: %v: admitted unchanged; declare the kind's shape (duck.Shapes.With, duck.TemplateAt)",
			bindingNames(bindings), err)}
		return resp
	case errors.Is(err, webhook.ErrOverloaded):
		return webhook.Overloaded(fmt.Errorf("%s: %w", object, err))
	case errors.As(err, &limit), errors.Is(err, webhook.ErrOverBudget):
		return webhook.Errored(http.StatusRequestEntityTooLarge, fmt.Errorf("%s: %w", object, err))
	case errors.Is(err, duck.ErrTooDeep):
		return webhook.Errored(http.StatusRequestEntityTooLarge, fmt.Errorf("%s: %w (%s)", object, err, webhook.SettingNameFrom(ctx, "ObjectLimits.MaxDepth")))
	}
	return webhook.Errored(http.StatusBadRequest, fmt.Errorf("%s: %w", object, err))
}

// bindingNames names the Bindings for a message: "binding ns/a" or
// "bindings ns/a, ns/b and 3 more".
func bindingNames(bindings []Bindable) string {
	const shown = 3
	names := make([]string, 0, min(len(bindings), shown))
	for _, b := range bindings[:min(len(bindings), shown)] {
		names = append(names, b.GetNamespace()+"/"+b.GetName())
	}
	out := strings.Join(names, ", ")
	if len(bindings) > shown {
		out += fmt.Sprintf(" and %d more", len(bindings)-shown)
	}
	if len(bindings) == 1 {
		return "binding " + out
	}
	return "bindings " + out
}
