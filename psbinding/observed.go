package psbinding

import (
	"encoding/json"
	"errors"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/duck"
)

// observed is a subject as one attempt at patching it read it. A subject
// read by GET comes as an unstructured object (u). One listed through a
// duck.RawLister comes as its typed object (a built-in kind read as
// protobuf; typed) or as the JSON the kube-apiserver sent (raw): its pod
// template is decoded from the bytes (Shape.Decode), its patch guarded
// from them (duck.GuardJSON), and the whole object decoded into u only
// when a rollback record needs it. Decoding a listed Deployment into a map
// and converting the map again cost the reconciler a third of its CPU
// while binding a selector's subjects (bench/RESULTS.md, 2026-11-27). An
// observed belongs to one goroutine.
type observed struct {
	u   *unstructured.Unstructured
	raw []byte
	// typed is a listed subject of a built-in kind that came as protobuf
	// (duck.RawObject.Object): its pod template is read from it with no
	// decoding (Shape.FromObject), and raw is written from it only when
	// a patch is to be guarded or a rollback recorded. ListRaw hands over
	// only objects whose JSON is the kube-apiserver's, field for field.
	typed runtime.Object
	// apiVersion and kind are the list's, for a listed item that
	// carries none (a built-in kind's items do not).
	apiVersion, kind string
}

// pod decodes the subject's metadata and pod template where shape finds
// them, as Shape.FromUnstructured does: an error wrapping
// duck.ErrNoPodTemplate comes with the metadata. JSON that Shape.Decode
// refuses for another reason is decoded whole and converted, as a GET's
// object is, so that both reads say the same of it.
func (o *observed) pod(shape duck.Shape) (*duck.WithPod, error) {
	if o.typed != nil && o.raw == nil && o.u == nil {
		w, err := shape.FromObject(o.typed)
		if w != nil && w.APIVersion == "" && w.Kind == "" {
			w.APIVersion, w.Kind = o.apiVersion, o.kind
		}
		return w, err
	}
	if o.raw == nil || o.u != nil {
		return shape.FromUnstructured(o.u)
	}
	w, err := shape.Decode(o.raw)
	if err == nil || errors.Is(err, duck.ErrNoPodTemplate) {
		if w.APIVersion == "" && w.Kind == "" {
			w.APIVersion, w.Kind = o.apiVersion, o.kind
		}
		return w, err
	}
	u, uerr := o.object()
	if uerr != nil {
		return nil, err
	}
	return shape.FromUnstructured(u)
}

// deleting reports whether the subject is being deleted, from its
// object, or from before (what pod returned) when only the JSON is held.
func (o *observed) deleting(before *duck.WithPod) bool {
	if o.u != nil {
		return o.u.GetDeletionTimestamp() != nil
	}
	return before != nil && before.DeletionTimestamp != nil
}

// object returns the subject as an unstructured object, decoding the
// JSON at the first call.
func (o *observed) object() (*unstructured.Unstructured, error) {
	if o.u != nil {
		return o.u, nil
	}
	if err := o.written(); err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(o.raw, &obj); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if obj == nil {
		return nil, errors.New("decode: the object is null")
	}
	o.u = &unstructured.Unstructured{Object: obj}
	if o.u.GetAPIVersion() == "" && o.u.GetKind() == "" {
		o.u.SetAPIVersion(o.apiVersion)
		o.u.SetKind(o.kind)
	}
	return o.u, nil
}

// guard is duck.Guard of ops against the subject: from the JSON when no
// object was decoded from it.
func (o *observed) guard(ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	if o.u == nil {
		if err := o.written(); err != nil {
			return nil, err
		}
		return duck.GuardJSON(o.raw, ops)
	}
	return duck.Guard(o.u.Object, ops)
}

// written sets raw to the typed object's JSON, when the subject came as
// one and raw is not set yet.
func (o *observed) written() error {
	if o.raw != nil || o.typed == nil {
		return nil
	}
	raw, err := json.Marshal(o.typed)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	o.raw = raw
	return nil
}
