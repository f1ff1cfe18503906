package configmap

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// InformedWatcher is the Watcher a process runs: it watches the ConfigMaps
// of one namespace through an informer and calls the observers of a name
// with that ConfigMap whenever it is added, changed or deleted (nil then).
//
// Observers are registered with Watch, normally by controller constructors
// before Start. Start runs the informer, waits for its cache, and calls the
// observers of every watched name once with the current ConfigMap, or nil
// when it does not exist. Calls to the observers are serialised: no two
// observers run at the same time, and an observer sees the changes of its
// ConfigMap in order. An observer may be called again with content it has
// already seen (a resync, or a delete racing Start's initial call).
//
// An InformedWatcher is safe for concurrent use.
type InformedWatcher struct {
	client    kubernetes.Interface
	namespace string

	// dispatch serialises observer calls, and makes Start's initial calls
	// and the informer's events one ordered stream.
	dispatch  sync.Mutex
	observers map[string][]Observer
	lister    corev1listers.ConfigMapNamespaceLister // set by Start once synced

	mu      sync.Mutex
	started bool
	stopped bool // Shutdown was called: a Start still to come returns at once
	cancel  context.CancelFunc
	done    chan struct{}
}

var _ Watcher = (*InformedWatcher)(nil)

// NewInformedWatcher returns a watcher of the ConfigMaps in namespace,
// read through client. It starts nothing: call Start after registering the
// observers. Its informer lists and watches ConfigMaps in namespace only,
// so the process needs RBAC for ConfigMaps in that namespace alone.
func NewInformedWatcher(client kubernetes.Interface, namespace string) *InformedWatcher {
	return &InformedWatcher{
		client:    client,
		namespace: namespace,
		observers: map[string][]Observer{},
	}
}

// Namespace returns the namespace the watcher watches.
func (w *InformedWatcher) Namespace() string { return w.namespace }

// Watch registers observers for the ConfigMap called name. Before Start
// they are first called by Start; after Start they are called at once with
// the current ConfigMap (nil when missing), then on every change.
func (w *InformedWatcher) Watch(name string, observers ...Observer) {
	w.dispatch.Lock()
	defer w.dispatch.Unlock()
	w.observers[name] = append(w.observers[name], observers...)
	if w.lister == nil {
		return
	}
	cm := w.current(name)
	for _, o := range observers {
		o(cm)
	}
}

// Start runs the informer until ctx ends or Shutdown is called, waits for
// its cache to fill, then calls every observer registered so far with the
// current content of its ConfigMap (nil when missing). It returns an error,
// after stopping the informer, when ctx ends or Shutdown is called before
// the cache syncs (a cache that cannot sync, ConfigMaps forbidden say,
// holds Start only until then), when Shutdown was called before it, and
// when called more than once.
//
// So a caller may run the informer on a long-lived context and bound only
// the wait: Start in a goroutine, and Shutdown when its own deadline
// passes; Start then returns promptly.
func (w *InformedWatcher) Start(ctx context.Context) error {
	w.mu.Lock()
	switch {
	case w.started:
		w.mu.Unlock()
		return fmt.Errorf("configmap: watcher of namespace %s already started", w.namespace)
	case w.stopped:
		w.mu.Unlock()
		return fmt.Errorf("configmap: watcher of namespace %s shut down before it started", w.namespace)
	}
	w.started = true
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.done = make(chan struct{})
	w.mu.Unlock()

	factory := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithNamespace(w.namespace))
	cms := factory.Core().V1().ConfigMaps()
	informer := cms.Informer()
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.changed(obj, false) },
		UpdateFunc: func(_, obj any) { w.changed(obj, false) },
		DeleteFunc: func(obj any) { w.changed(obj, true) },
	})
	if err != nil {
		cancel()
		close(w.done)
		return fmt.Errorf("configmap: watch ConfigMaps in namespace %s: %w", w.namespace, err)
	}
	factory.StartWithContext(runCtx)
	go func() {
		defer close(w.done)
		<-runCtx.Done()
		factory.Shutdown()
	}()

	// The handler's own sync, not only the store's, so that every initial
	// add has reached the observers before the missing names are reported.
	// The wait ends with runCtx, which Shutdown ends too: waiting on ctx
	// alone, a Shutdown from a caller whose deadline passed would stop the
	// informer and leave Start waiting for a sync that can no longer come.
	if !cache.WaitForCacheSync(runCtx.Done(), reg.HasSynced) {
		cause := context.Cause(ctx)
		if cause == nil {
			cause = errors.New("shut down")
		}
		w.Shutdown()
		return fmt.Errorf("configmap: wait for ConfigMaps in namespace %s: %w", w.namespace, errors.Join(cause, errors.New("cache not synced")))
	}

	w.dispatch.Lock()
	defer w.dispatch.Unlock()
	// Events seen so far were dropped (the lister was nil); the cache
	// already holds what they said, so one call per name from the cache
	// replaces them. Events from here on are dispatched in order after it.
	w.lister = cms.Lister().ConfigMaps(w.namespace)
	for name, observers := range w.observers {
		cm := w.current(name)
		for _, o := range observers {
			o(cm)
		}
	}
	return nil
}

// Shutdown stops the informer and waits for it to return; a Start waiting
// for the cache returns its error. It is safe to call more than once, and
// before Start, which then returns an error at once.
func (w *InformedWatcher) Shutdown() {
	w.mu.Lock()
	w.stopped = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// current returns the ConfigMap name from the cache, nil when missing. The
// caller holds dispatch and the lister is set.
func (w *InformedWatcher) current(name string) *corev1.ConfigMap {
	// A lister fails only with NotFound.
	cm, err := w.lister.Get(name)
	if err != nil {
		return nil
	}
	return cm
}

func (w *InformedWatcher) changed(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	w.dispatch.Lock()
	defer w.dispatch.Unlock()
	if w.lister == nil {
		// Before Start's initial call, which reads the cache instead.
		return
	}
	var arg *corev1.ConfigMap
	if !deleted {
		arg = cm
	}
	for _, o := range w.observers[cm.Name] {
		o(arg)
	}
}
