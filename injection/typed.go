package injection

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// Object is the constraint on a typed informer's type: PT is *T, and *T is a
// Kubernetes object with metadata. A CRD's Go type that embeds
// metav1.TypeMeta and metav1.ObjectMeta and has DeepCopyObject satisfies it.
type Object[T any] interface {
	*T
	runtime.Object
	metav1.Object
}

// TypedInformerOptions configure NewTypedInformer.
type TypedInformerOptions struct {
	// ResyncPeriod is the informer's resync period; 0 disables resync.
	ResyncPeriod time.Duration
	// ConversionError, if set, hears of each object that does not convert
	// to the informer's type. Such objects are left out of the cache; a watch
	// event for one removes any older copy, so a controller never acts on a
	// version of an object it could not read.
	ConversionError func(obj *unstructured.Unstructured, err error)
}

// TypedInformer lists and watches one resource, in all namespaces, through
// the dynamic client and keeps *T in its cache, converted with
// runtime.DefaultUnstructuredConverter. It serves custom resources that have
// a Go type but no generated clientset.
type TypedInformer[T any, PT Object[T]] struct {
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
	lister   *TypedLister[T]
}

// NewTypedInformer returns an unstarted informer for gvr. Nothing else
// starts it: its caller runs it (Informer().RunWithContext) and stops it.
// Within a process built by New, use TypedInformerFor instead, which starts
// it with the other informers.
func NewTypedInformer[T any, PT Object[T]](client dynamic.Interface, gvr schema.GroupVersionResource, opts TypedInformerOptions) *TypedInformer[T, PT] {
	c := &typedConverter[T, PT]{report: opts.ConversionError}
	resource := client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			list, err := resource.List(ctx, lo)
			if apierrors.IsNotFound(err) && awaitServed(ctx, resource) {
				list, err = resource.List(ctx, lo)
			}
			if err != nil {
				return nil, err
			}
			return c.convertList(list), nil
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			w, err := resource.Watch(ctx, lo)
			if apierrors.IsNotFound(err) && awaitServed(ctx, resource) {
				w, err = resource.Watch(ctx, lo)
			}
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, c.convertEvent), nil
		},
	}
	// Streaming lists reach convertEvent like any watch; the wrapper turns
	// them off for clients that cannot serve them, such as the fakes.
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), PT(new(T)), cache.SharedIndexInformerOptions{
		ResyncPeriod:      opts.ResyncPeriod,
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: gvr.String(),
	})
	return &TypedInformer[T, PT]{
		gvr:      gvr,
		informer: inf,
		lister:   &TypedLister[T]{indexer: inf.GetIndexer(), resource: gvr.GroupResource()},
	}
}

// TypedInformerFor returns the typed informer for gvr from the InformerSet in
// ctx, creating it on the first request: every caller asking for the same
// resource and type shares one informer. It starts with the set's other
// informers at the next InformerSet.Start, uses the set's resync period and
// logs conversion errors to the logger New found in its context. It panics,
// like Informers, when ctx carries no InformerSet.
func TypedInformerFor[T any, PT Object[T]](ctx context.Context, gvr schema.GroupVersionResource) *TypedInformer[T, PT] {
	s := Informers(ctx)
	key := typedKey{gvr: gvr, typ: reflect.TypeFor[T]()}
	v := s.typedInformer(key, func() (cache.SharedIndexInformer, any) {
		ti := NewTypedInformer[T, PT](s.dynamic, gvr, TypedInformerOptions{
			ResyncPeriod:    s.resync,
			ConversionError: s.logConversionError,
		})
		return ti.informer, ti
	})
	return v.(*TypedInformer[T, PT])
}

// GVR returns the resource the informer watches.
func (i *TypedInformer[T, PT]) GVR() schema.GroupVersionResource { return i.gvr }

// Informer returns the shared informer, to add event handlers to or to wait
// for. Its objects are *T.
func (i *TypedInformer[T, PT]) Informer() cache.SharedIndexInformer { return i.informer }

// Lister returns a lister over the informer's cache.
func (i *TypedInformer[T, PT]) Lister() *TypedLister[T] { return i.lister }

// TypedLister reads *T from an informer's cache. The objects it returns are
// the cache's own: callers must not change them (DeepCopy first).
type TypedLister[T any] struct {
	indexer  cache.Indexer
	resource schema.GroupResource
}

// List returns the objects in all namespaces whose labels match selector.
func (l *TypedLister[T]) List(selector labels.Selector) ([]*T, error) {
	var out []*T
	err := cache.ListAll(l.indexer, selector, func(obj any) { out = append(out, obj.(*T)) })
	return out, err
}

// ListNamespace returns the objects in namespace whose labels match selector.
func (l *TypedLister[T]) ListNamespace(namespace string, selector labels.Selector) ([]*T, error) {
	var out []*T
	err := cache.ListAllByNamespace(l.indexer, namespace, selector, func(obj any) { out = append(out, obj.(*T)) })
	return out, err
}

// Get returns the object namespace/name (namespace empty for a cluster-scoped
// resource), or an error that satisfies apierrors.IsNotFound.
func (l *TypedLister[T]) Get(namespace, name string) (*T, error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := l.indexer.GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", l.resource, key, err)
	}
	if !ok {
		return nil, apierrors.NewNotFound(l.resource, name)
	}
	return obj.(*T), nil
}

// typedConverter turns what the dynamic client returns into *T.
type typedConverter[T any, PT Object[T]] struct {
	report func(*unstructured.Unstructured, error)
}

func (c *typedConverter[T, PT]) convert(u *unstructured.Unstructured) (PT, error) {
	out := PT(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("%s %s %s: convert to %T: %w", u.GetAPIVersion(), u.GetKind(), objectKey(u), out, err)
	}
	return out, nil
}

func (c *typedConverter[T, PT]) convertList(list *unstructured.UnstructuredList) *typedList[T, PT] {
	out := &typedList[T, PT]{Items: make([]T, 0, len(list.Items))}
	out.APIVersion, out.Kind = list.GetAPIVersion(), list.GetKind()
	out.ResourceVersion = list.GetResourceVersion()
	out.Continue = list.GetContinue()
	out.RemainingItemCount = list.GetRemainingItemCount()
	for i := range list.Items {
		obj, err := c.convert(&list.Items[i])
		if err != nil {
			c.reportError(&list.Items[i], err)
			continue
		}
		out.Items = append(out.Items, *obj)
	}
	return out
}

func (c *typedConverter[T, PT]) convertEvent(e watch.Event) (watch.Event, bool) {
	u, ok := e.Object.(*unstructured.Unstructured)
	if !ok {
		return e, true // an Error event's *metav1.Status
	}
	if e.Type == watch.Bookmark {
		// A bookmark carries only a resourceVersion (and, ending a streaming
		// list, an annotation); it need not convert.
		e.Object = stub[T, PT](u, false)
		return e, true
	}
	obj, err := c.convert(u)
	if err != nil {
		c.reportError(u, err)
		// Forget any older copy: the cache must not keep a version of the
		// object the server no longer has.
		e.Type, e.Object = watch.Deleted, stub[T, PT](u, true)
		return e, true
	}
	e.Object = obj
	return e, true
}

func (c *typedConverter[T, PT]) reportError(u *unstructured.Unstructured, err error) {
	if c.report != nil {
		c.report(u, err)
	}
}

// stub is an empty *T with u's kind, resourceVersion and annotations, and,
// when identity is set, its namespace, name and UID.
func stub[T any, PT Object[T]](u *unstructured.Unstructured, identity bool) PT {
	out := PT(new(T))
	out.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetAnnotations(u.GetAnnotations())
	if identity {
		out.SetNamespace(u.GetNamespace())
		out.SetName(u.GetName())
		out.SetUID(u.GetUID())
	}
	return out
}

func objectKey(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// typedList is the list a TypedInformer's reflector reads; its Items are
// what meta.ExtractList finds.
type typedList[T any, PT Object[T]] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *typedList[T, PT]) DeepCopyObject() runtime.Object {
	out := &typedList[T, PT]{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]T, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *PT(&l.Items[i]).DeepCopyObject().(PT)
	}
	return out
}

// servedPoll is how often awaitServed asks whether a resource is served.
const servedPoll = 500 * time.Millisecond

// awaitServed waits until the API server serves resource again (its CRD
// was deleted, or is not established yet) and reports whether it does,
// false when ctx ends first. The informer's list or watch waits here
// instead of failing: a failure would send client-go's reflector into its
// backoff, which grows to 30 seconds (with jitter, gaps of 39 s were seen),
// so a CRD re-created meanwhile would be noticed only then. Waiting costs
// one LIST of at most one object every servedPoll.
func awaitServed(ctx context.Context, resource dynamic.NamespaceableResourceInterface) bool {
	t := time.NewTicker(servedPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if _, err := resource.List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsNotFound(err) {
			return ctx.Err() == nil
		}
	}
}
