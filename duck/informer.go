package duck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// InformerFactory hands out an informer, and a lister over its cache, for a
// resource. Implementations compose: CachedInformerFactory over
// EnqueueInformerFactory over TypedInformerFactory is the usual stack.
type InformerFactory interface {
	// Get returns the informer and lister for gvr. ctx bounds the call
	// (for example a wait for the cache to sync), not the informer's life.
	Get(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error)
}

// TypedInformerFactory builds informers that list and watch any resource, in
// all namespaces, through the dynamic client and keep *WithPod objects in
// their cache, without managedFields (which no Binding needs). It neither starts nor caches them: every Get builds a new,
// unstarted informer, and whoever runs it (CachedInformerFactory, or the
// caller with informer.Run(stop)) stops it.
type TypedInformerFactory struct {
	// Client lists and watches. Required.
	Client dynamic.Interface
	// Shapes finds each object's shape from its kind; the zero value knows
	// the built-in shapes.
	Shapes Shapes
	// ResyncPeriod is the informers' resync period; 0 disables resync.
	ResyncPeriod time.Duration
	// ConversionError, if set, hears of each object that does not convert
	// to WithPod. Such objects are left out of the cache (a watch event for
	// one removes its stale copy), so a Binding never patches an object it
	// could not read.
	ConversionError func(obj *unstructured.Unstructured, err error)
}

var _ InformerFactory = (*TypedInformerFactory)(nil)

// Get implements InformerFactory. The informer is indexed by namespace.
func (f *TypedInformerFactory) Get(_ context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
	if f.Client == nil {
		return nil, nil, fmt.Errorf("informer for %s: TypedInformerFactory has no Client", gvr)
	}
	resource := f.Client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := resource.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return f.convertList(list), nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := resource.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, f.convertEvent), nil
		},
	}
	// Streaming lists (WatchList) work through convertEvent; the wrapper
	// turns them off for clients that cannot do them, such as fakes.
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, f.Client), &WithPod{}, cache.SharedIndexInformerOptions{
		ResyncPeriod:      f.ResyncPeriod,
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: gvr.String(),
	})
	return inf, cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()), nil
}

func (f *TypedInformerFactory) convert(u *unstructured.Unstructured) (*WithPod, error) {
	// managedFields are about a quarter of a workload's size and nothing a
	// Binding reads or patches; dropping them before conversion keeps them
	// out of the cache altogether.
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	return f.Shapes.For(u.GroupVersionKind().GroupKind()).FromUnstructured(u)
}

func (f *TypedInformerFactory) convertList(list *unstructured.UnstructuredList) *WithPodList {
	out := &WithPodList{Items: make([]WithPod, 0, len(list.Items))}
	out.APIVersion, out.Kind = list.GetAPIVersion(), list.GetKind()
	out.ResourceVersion = list.GetResourceVersion()
	out.Continue = list.GetContinue()
	out.RemainingItemCount = list.GetRemainingItemCount()
	for i := range list.Items {
		w, err := f.convert(&list.Items[i])
		if err != nil {
			f.reportConversion(&list.Items[i], err)
			continue
		}
		out.Items = append(out.Items, *w)
	}
	return out
}

func (f *TypedInformerFactory) convertEvent(e watch.Event) (watch.Event, bool) {
	u, ok := e.Object.(*unstructured.Unstructured)
	if !ok {
		return e, true // an Error event's *metav1.Status
	}
	if e.Type == watch.Bookmark {
		w := &WithPod{}
		w.APIVersion, w.Kind = u.GetAPIVersion(), u.GetKind()
		w.ResourceVersion = u.GetResourceVersion()
		w.Annotations = u.GetAnnotations()
		e.Object = w
		return e, true
	}
	w, err := f.convert(u)
	if err != nil {
		f.reportConversion(u, err)
		// Forget any older copy: the cache must not keep a version of the
		// object the server no longer has.
		w = &WithPod{}
		w.APIVersion, w.Kind = u.GetAPIVersion(), u.GetKind()
		w.Namespace, w.Name, w.UID = u.GetNamespace(), u.GetName(), u.GetUID()
		w.ResourceVersion = u.GetResourceVersion()
		e.Type = watch.Deleted
	}
	e.Object = w
	return e, true
}

func (f *TypedInformerFactory) reportConversion(u *unstructured.Unstructured, err error) {
	if f.ConversionError != nil {
		f.ConversionError(u, err)
	}
}

// EnqueueInformerFactory adds EventHandler to every informer its Delegate
// hands out. Put it under a CachedInformerFactory so that each informer gets
// the handler once.
type EnqueueInformerFactory struct {
	// Delegate builds the informers. Required.
	Delegate InformerFactory
	// EventHandler is added to each informer. Required.
	EventHandler cache.ResourceEventHandler
}

var _ InformerFactory = (*EnqueueInformerFactory)(nil)

// Get implements InformerFactory.
func (f *EnqueueInformerFactory) Get(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
	inf, lister, err := f.Delegate.Get(ctx, gvr)
	if err != nil {
		return nil, nil, err
	}
	if _, err := inf.AddEventHandler(f.EventHandler); err != nil {
		return nil, nil, fmt.Errorf("informer for %s: add event handler: %w", gvr, err)
	}
	return inf, lister, nil
}

// CachedInformerFactory keeps one informer per resource. The first Get for a
// resource builds the informer with Delegate and starts it; every Get, the
// first included, then waits until the informer's cache has synced or ctx
// ends. Informers run until Stop is closed; Get never starts anything after
// that. Errors from Delegate are not kept: the next Get tries again.
// CachedInformerFactory is safe for concurrent use and must not be copied
// after first use.
type CachedInformerFactory struct {
	// Delegate builds the informers. Required.
	Delegate InformerFactory
	// Stop, when closed, stops every informer the factory started. Required:
	// a nil channel would leave them running for the life of the process.
	Stop <-chan struct{}

	mu      sync.Mutex
	entries map[schema.GroupVersionResource]*informerEntry
}

var _ InformerFactory = (*CachedInformerFactory)(nil)

// informerEntry is one resource's informer; ready closes once the attempt
// to build it is over, successful or not.
type informerEntry struct {
	ready  chan struct{}
	inf    cache.SharedIndexInformer
	lister cache.GenericLister
	err    error
}

// ErrFactoryStopped is returned by CachedInformerFactory.Get once its Stop
// channel is closed.
var ErrFactoryStopped = errors.New("informer factory stopped")

// Get implements InformerFactory. It returns an error that wraps ctx.Err()
// when ctx ends before the cache has synced, and ErrFactoryStopped once
// Stop is closed; the informer is kept either way.
func (f *CachedInformerFactory) Get(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
	if f.Stop == nil {
		return nil, nil, fmt.Errorf("informer for %s: CachedInformerFactory has no Stop channel", gvr)
	}
	select {
	case <-f.Stop:
		return nil, nil, fmt.Errorf("informer for %s: %w", gvr, ErrFactoryStopped)
	default:
	}
	e, err := f.entry(ctx, gvr)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-e.inf.HasSyncedChecker().Done():
		return e.inf, e.lister, nil
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("informer for %s: wait for cache sync: %w", gvr, ctx.Err())
	case <-f.Stop:
		return nil, nil, fmt.Errorf("informer for %s: wait for cache sync: %w", gvr, ErrFactoryStopped)
	}
}

// entry returns the started informer for gvr, building it if no other call
// is doing so; concurrent callers wait for the one that builds.
func (f *CachedInformerFactory) entry(ctx context.Context, gvr schema.GroupVersionResource) (*informerEntry, error) {
	f.mu.Lock()
	if f.entries == nil {
		f.entries = map[schema.GroupVersionResource]*informerEntry{}
	}
	e, ok := f.entries[gvr]
	if !ok {
		e = &informerEntry{ready: make(chan struct{})}
		f.entries[gvr] = e
	}
	f.mu.Unlock()

	if ok {
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("informer for %s: wait for informer: %w", gvr, ctx.Err())
		}
		if e.err != nil {
			return nil, e.err
		}
		return e, nil
	}

	e.inf, e.lister, e.err = f.Delegate.Get(ctx, gvr)
	if e.err == nil {
		go e.inf.Run(f.Stop)
	} else {
		f.mu.Lock()
		delete(f.entries, gvr)
		f.mu.Unlock()
	}
	close(e.ready)
	if e.err != nil {
		return nil, e.err
	}
	return e, nil
}
