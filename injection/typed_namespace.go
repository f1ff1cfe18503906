package injection

import "k8s.io/apimachinery/pkg/labels"

// TypedNamespaceLister reads the *T of one namespace from an informer's
// cache: the shape of a generated lister's per-namespace accessor
// (Lister().GithubBindings(ns).Get(name) in knative) without code
// generation. The objects it returns are the cache's own: callers must not
// change them (DeepCopy first).
type TypedNamespaceLister[T any] struct {
	lister    *TypedLister[T]
	namespace string
}

// ByNamespace returns a lister of namespace's objects, as client-go's
// GenericLister.ByNamespace does; Lister().ByNamespace(ns).Get(name) is
// Lister().Get(ns, name).
func (l *TypedLister[T]) ByNamespace(namespace string) TypedNamespaceLister[T] {
	return TypedNamespaceLister[T]{lister: l, namespace: namespace}
}

// Get returns the object name in the lister's namespace, or an error that
// satisfies apierrors.IsNotFound.
func (l TypedNamespaceLister[T]) Get(name string) (*T, error) {
	return l.lister.Get(l.namespace, name)
}

// List returns the objects in the lister's namespace whose labels match
// selector.
func (l TypedNamespaceLister[T]) List(selector labels.Selector) ([]*T, error) {
	return l.lister.ListNamespace(l.namespace, selector)
}
