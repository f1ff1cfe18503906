package policy

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client is the part of a typed client-go client of a cluster-scoped kind
// that Typed writes with (for example
// AdmissionregistrationV1().ValidatingAdmissionPolicies()).
type Client[PT any] interface {
	Create(ctx context.Context, obj PT, opts metav1.CreateOptions) (PT, error)
	Update(ctx context.Context, obj PT, opts metav1.UpdateOptions) (PT, error)
}

// Getter reads an object by name, from a cache (a lister) or the API.
type Getter[PT any] func(name string) (PT, error)

// Typed is an Object of one client-go kind. Spec returns a pointer to the
// part of an object the Typed owns (its spec); everything else of an object
// found in the cluster (labels, annotations, status) is kept.
type Typed[T any, PT interface {
	*T
	metav1.Object
}] struct {
	// Desired is the object to program. Its spec must carry every default
	// the API server fills in, or the comparison never settles; the
	// builders in this package do.
	Desired PT
	// Get reads the current object; a NotFound error means it is missing.
	Get Getter[PT]
	// Client creates and updates it.
	Client Client[PT]
	// Spec returns a pointer to the owned part of obj, for comparison.
	Spec func(obj PT) any
	// SetSpec copies the owned part of src into dst.
	SetSpec func(dst, src PT)
	// Kind names the kind in errors and logs.
	Kind string
	// FieldManager is sent with every write.
	FieldManager string
}

// Name implements Object.
func (t *Typed[T, PT]) Name() string { return t.Desired.GetName() }

// Ensure implements Object.
func (t *Typed[T, PT]) Ensure(ctx context.Context) (Action, error) {
	name := t.Desired.GetName()
	current, err := t.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		obj := PT(new(T))
		*obj = *t.Desired
		if _, err := t.Client.Create(ctx, obj, metav1.CreateOptions{FieldManager: t.FieldManager}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache lags; the informer's add event reconciles again.
				return Unchanged, nil
			}
			return Unchanged, fmt.Errorf("%s %s: create: %w", t.Kind, name, err)
		}
		return Created, nil
	case err != nil:
		return Unchanged, fmt.Errorf("%s %s: get: %w", t.Kind, name, err)
	}
	want := t.Spec(t.Desired)
	if equality.Semantic.DeepEqual(want, t.Spec(current)) {
		return Unchanged, nil
	}
	obj := PT(new(T))
	*obj = *current // shallow: only the spec is replaced below
	t.SetSpec(obj, t.Desired)
	obj.SetLabels(withLabels(current.GetLabels(), t.Desired.GetLabels()))
	if _, err := t.Client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: t.FieldManager}); err != nil {
		// A conflict means the cache is behind; the update event retries.
		return Unchanged, fmt.Errorf("%s %s: restore spec: %w", t.Kind, name, err)
	}
	return Restored, nil
}

// withLabels returns a new map of have's labels with want's set over them:
// what an Object writes back when it restores a spec, keeping the labels
// others added.
func withLabels(have, want map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	maps.Copy(out, have)
	maps.Copy(out, want)
	return out
}
