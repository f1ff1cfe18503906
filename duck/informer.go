package duck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// InformerFactory hands out an informer, and a lister over its cache, for a
// resource. Implementations compose: a process keeps one
// CachedInformerFactory over a MetadataInformerFactory (one slim cache per
// resource, shared by every Binding kind), and each Binding kind reaches it
// through its own EnqueueInformerFactory, which adds the kind's event
// handler.
//
// A caching factory (CachedInformerFactory, and what wraps it) returns the
// same started informer for a resource on every call, once its cache has
// synced; MetadataInformerFactory returns a new, unstarted one. Objects in
// a cache are shared: callers must not change them.
type InformerFactory interface {
	// Get returns the informer and lister for gvr. ctx bounds the call
	// (for example a wait for the cache to sync), not the informer's life.
	Get(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error)
}

// BoundIndex is the name of the index over a subject's records
// (RecordAnnotations) that every informer MetadataInformerFactory builds:
// BoundIndexKey(namespace, by) lists the subjects in namespace whose
// records name the Binding by, whatever its UID (a predecessor of the same
// name included).
const BoundIndex = "bindkit-bound"

// BoundIndexKey is the BoundIndex key of the subjects in namespace whose
// records name the Binding by (its resource and name: by.Key()).
func BoundIndexKey(namespace string, by BoundBy) string { return namespace + "/" + by.Key() }

// MetadataInformerFactory builds informers that list and watch a resource,
// in all namespaces, as metadata only (client-go's metadata client asks the
// server for PartialObjectMetadata), and cache a slim copy of each object:
// its kind (Mapper names it, so the tracker can read it from the object),
// name, namespace, UID, resourceVersion, generation, labels, deletion
// timestamp and the record annotations (RecordAnnotations). Nothing else is kept: no managedFields, no
// other annotations, no spec. A Binding reads a subject's full object only
// when the subject may need a patch. The informers are indexed by namespace
// and by BoundIndex.
//
// It neither starts nor caches informers: every Get builds a new, unstarted
// informer, and whoever runs it (CachedInformerFactory, or the caller with
// informer.Run(stop)) stops it.
type MetadataInformerFactory struct {
	// Client lists and watches. Required.
	Client metadata.Interface
	// Mapper names the kind of each resource. Required.
	Mapper meta.RESTMapper
	// ResyncPeriod is the informers' resync period; 0 disables resync.
	ResyncPeriod time.Duration
}

var _ InformerFactory = (*MetadataInformerFactory)(nil)

// Get implements InformerFactory. The informer's objects are
// *metav1.PartialObjectMetadata with their kind set.
func (f *MetadataInformerFactory) Get(_ context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
	switch {
	case f.Client == nil:
		return nil, nil, fmt.Errorf("informer for %s: MetadataInformerFactory has no Client", gvr)
	case f.Mapper == nil:
		return nil, nil, fmt.Errorf("informer for %s: MetadataInformerFactory has no Mapper", gvr)
	}
	gvk, err := f.Mapper.KindFor(gvr)
	if err != nil {
		return nil, nil, fmt.Errorf("informer for %s: kind: %w", gvr, err)
	}
	resource := f.Client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, opts)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, f.Client), &metav1.PartialObjectMetadata{}, cache.SharedIndexInformerOptions{
		ResyncPeriod: f.ResyncPeriod,
		Indexers: cache.Indexers{
			cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
			BoundIndex:           boundIndexFunc,
		},
		ObjectDescription: gvr.String(),
	})
	if err := inf.SetTransform(slimmer(gvk)); err != nil {
		return nil, nil, fmt.Errorf("informer for %s: %w", gvr, err)
	}
	return inf, cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()), nil
}

// slimmer returns the transform that keeps of each object only what a
// Binding needs to decide whether a subject may need a patch. It builds a
// new object rather than trimming the old one, so the strings of what it
// drops (a last-applied-configuration annotation can be the size of the
// whole object) are not kept alive by the cache.
func slimmer(gvk schema.GroupVersionKind) cache.TransformFunc {
	apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
	return func(obj any) (any, error) {
		in, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil // a tombstone: its object was slimmed on its way in
		}
		out := &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
			ObjectMeta: metav1.ObjectMeta{
				Name:              in.Name,
				Namespace:         in.Namespace,
				UID:               in.UID,
				ResourceVersion:   in.ResourceVersion,
				Generation:        in.Generation,
				Labels:            in.Labels,
				DeletionTimestamp: in.DeletionTimestamp,
			},
		}
		for _, key := range RecordAnnotations {
			if v, ok := in.Annotations[key]; ok {
				if out.Annotations == nil {
					out.Annotations = make(map[string]string, len(RecordAnnotations))
				}
				out.Annotations[key] = v
			}
		}
		return out, nil
	}
}

func boundIndexFunc(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	ann := m.GetAnnotations()
	if len(ann) == 0 {
		return nil, nil
	}
	var keys []string
	add := func(by BoundBy) {
		if k := BoundIndexKey(m.GetNamespace(), by); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for by := range BoundOf(ann) {
		add(by)
	}
	for by := range ChangesOf(ann) {
		add(by)
	}
	for by := range HeldOf(ann) {
		add(by)
	}
	// Records of a newer format name their Binding too: its deletion
	// must find them (see RecordFormat).
	for _, key := range RecordAnnotations {
		for _, by := range newerIdentities(key, ann[key]) {
			add(by)
		}
	}
	return keys, nil
}

// EnqueueInformerFactory adds EventHandler to every informer its Delegate
// hands out, once per resource however often Get is called, so a Binding
// kind can put its handler on the process's shared informers. Its zero value
// is not usable: set both fields. It is safe for concurrent use and must not
// be copied after first use.
type EnqueueInformerFactory struct {
	// Delegate hands out the informers, typically a CachedInformerFactory
	// shared by every Binding kind. Required.
	Delegate InformerFactory
	// EventHandler is added to each informer. Required.
	EventHandler cache.ResourceEventHandler

	mu    sync.Mutex
	added map[cache.SharedIndexInformer]bool
}

var _ InformerFactory = (*EnqueueInformerFactory)(nil)

// Get implements InformerFactory.
func (f *EnqueueInformerFactory) Get(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
	if f.Delegate == nil || f.EventHandler == nil {
		return nil, nil, fmt.Errorf("informer for %s: EnqueueInformerFactory needs Delegate and EventHandler", gvr)
	}
	inf, lister, err := f.Delegate.Get(ctx, gvr)
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.added[inf] {
		return inf, lister, nil
	}
	if _, err := inf.AddEventHandler(f.EventHandler); err != nil {
		return nil, nil, fmt.Errorf("informer for %s: add event handler: %w", gvr, err)
	}
	if f.added == nil {
		f.added = map[cache.SharedIndexInformer]bool{}
	}
	f.added[inf] = true
	return inf, lister, nil
}

// CachedInformerFactory keeps one informer per resource. The first Get for a
// resource builds the informer with Delegate and starts it; every Get, the
// first included, then waits until the informer's cache has synced or ctx
// ends. Informers run until Stop is closed (for the life of the process
// when Stop is nil); Get never starts anything after that. Errors from
// Delegate are not kept: the next Get tries again. CachedInformerFactory is
// safe for concurrent use and must not be copied after first use.
type CachedInformerFactory struct {
	// Delegate builds the informers. Required.
	Delegate InformerFactory
	// Stop, when closed, stops every informer the factory started. A nil
	// Stop leaves them running for the life of the process.
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
	if f.Delegate == nil {
		return nil, nil, fmt.Errorf("informer for %s: CachedInformerFactory has no Delegate", gvr)
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
