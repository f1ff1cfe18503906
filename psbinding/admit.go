package psbinding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

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
	// excludedNamespace is never mutated, whatever the webhook configuration
	// says: the namespace the webhook itself runs in.
	excludedNamespace string
	// resource is the Bindings' resource, under which Admit records what it
	// applied in the subject's duck.BoundAnnotation; empty until known.
	resource atomic.Pointer[schema.GroupResource]
}

// boundBy is how b appears in a subject's duck.BoundAnnotation, and whether
// the Bindings' resource is known.
func (a *admitter) boundBy(b Bindable) (duck.BoundBy, bool) {
	gr := a.resource.Load()
	if gr == nil {
		return duck.BoundBy{}, false
	}
	return duck.BoundBy{Resource: *gr, Name: b.GetName()}, true
}

// setIndex replaces the index Admit consults and returns the Bindings that
// could not be indexed.
func (a *admitter) setIndex(bindings []Bindable) []error {
	ix, errs := newIndex(bindings, subjectOfBindable)
	a.index.Store(ix)
	return errs
}

// hasIndex reports whether an index has been built, i.e. Admit can decide.
func (a *admitter) hasIndex() bool { return a.index.Load() != nil }

// objectMeta is the part of a request's object needed to look Bindings up.
type objectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// decodeObjectMeta reads the object's top-level keys up to and including
// metadata, and stops there: the kube-apiserver writes metadata before spec,
// so a request that matches no Binding costs a scan of its metadata, not of
// the whole object. What follows metadata is checked only when a Binding
// matches and the object is decoded in full.
func decodeObjectMeta(raw []byte) (meta objectMeta, err error) {
	defer func() {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the object ended before it was complete
		}
	}()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil {
		return meta, err
	} else if tok != json.Delim('{') {
		return meta, fmt.Errorf("object is %v, not a JSON object", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return meta, err
		}
		if tok == "metadata" {
			return meta, dec.Decode(&meta)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return meta, err
		}
	}
	return meta, nil
}

// admit applies every Binding that matches the request's object and answers
// with the JSON patch that results: Do for live Bindings, Undo for Bindings
// being deleted, in the index's deterministic order. Requests it does not
// handle (other operations, subresources, kinds or namespaces no Binding
// names) are allowed untouched without decoding the object.
func (a *admitter) admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return webhook.Allowed()
	}
	if a.excludedNamespace != "" && req.Namespace == a.excludedNamespace {
		return webhook.Allowed()
	}
	ix := a.index.Load()
	if ix == nil {
		return webhook.Errored(http.StatusServiceUnavailable, fmt.Errorf("bindings not listed yet"))
	}
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	if !ix.inScope(gk.Group, gk.Kind, req.Namespace) {
		return webhook.Allowed()
	}
	meta, err := decodeObjectMeta(req.Object.Raw)
	if err != nil {
		return webhook.Errored(http.StatusBadRequest, fmt.Errorf("%s %s/%s: decode metadata: %w", gk, req.Namespace, req.Name, err))
	}
	if meta.Labels[ExcludeLabel] == "true" {
		// The configuration's object selector keeps such objects away; this
		// holds while an edited configuration is being restored.
		return webhook.Allowed()
	}
	name := req.Name
	if name == "" {
		name = meta.Name
	}
	bindings := ix.lookup(gk.Group, gk.Kind, req.Namespace, name, meta.Labels)
	if len(bindings) == 0 {
		return webhook.Allowed()
	}

	shape := a.shapes.For(gk)
	before, err := shape.Decode(req.Object.Raw)
	if err != nil {
		return webhook.Errored(http.StatusBadRequest, fmt.Errorf("%s %s/%s: %w", gk, req.Namespace, name, err))
	}
	after := before.DeepCopy()
	for _, b := range bindings {
		bctx := ctx
		if a.withContext != nil {
			if bctx, err = a.withContext(ctx, b); err != nil {
				return webhook.Denied(fmt.Sprintf("binding %s/%s: %v", b.GetNamespace(), b.GetName(), err))
			}
		}
		by, record := a.boundBy(b)
		if b.GetDeletionTimestamp() != nil {
			b.Undo(bctx, after)
			if record {
				duck.MarkUnbound(after, by)
			}
		} else {
			b.Do(bctx, after)
			if record {
				duck.MarkBound(after, by, b.GetGeneration())
			}
		}
	}
	ops, err := shape.CreatePatch(before, after)
	if err != nil {
		return webhook.Errored(http.StatusInternalServerError, fmt.Errorf("%s %s/%s: create patch: %w", gk, req.Namespace, name, err))
	}
	return webhook.PatchResponse(ops)
}
