package injection

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
)

// InformerSet is the set of informers one process (or one test) runs: the
// client-go shared informer factory for built-in kinds, the typed informers
// for custom resources (TypedInformerFor) and the duck informer factory.
//
// Informers start only if something asked for them, and only when Start is
// called: a controller constructor requests informers, main then calls
// Start and WaitForCacheSync, and only then runs its controllers. The
// exception is the duck factory, whose informers start on their first Get
// (see DuckInformerFactory).
//
// Everything the set started stops when Shutdown is called or the context
// given to New ends, whichever comes first. An InformerSet is safe for
// concurrent use.
type InformerSet struct {
	kube    informers.SharedInformerFactory
	kubeOf  func(namespace string) informers.SharedInformerFactory
	named   func(name string) informers.SharedInformerFactory
	duck    *duck.CachedInformerFactory
	dynamic dynamic.Interface
	resync  time.Duration
	logger  *zap.Logger

	// life ends on Shutdown or when New's context ends; every informer the
	// set runs stops with it.
	life   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	byNS     map[string]informers.SharedInformerFactory
	byName   map[string]informers.SharedInformerFactory
	typed    map[typedKey]*typedEntry
	order    []typedKey // request order, so Start and errors are deterministic
	shutdown bool
	wg       sync.WaitGroup
}

// typedKey tells typed informers apart: the same resource read as two Go
// types gets two informers.
type typedKey struct {
	gvr schema.GroupVersionResource
	typ reflect.Type
}

type typedEntry struct {
	informer cache.SharedIndexInformer
	value    any // the *TypedInformer[T, PT]
	started  bool
}

func newInformerSet(ctx context.Context, clients Clients, o Options, logger *zap.Logger) *InformerSet {
	life, cancel := context.WithCancel(ctx)
	s := &InformerSet{
		kube:    informers.NewSharedInformerFactoryWithOptions(clients.Kube, o.ResyncPeriod, o.KubeInformerOptions...),
		dynamic: clients.Dynamic,
		resync:  o.ResyncPeriod,
		logger:  logger,
		life:    life,
		cancel:  cancel,
		typed:   map[typedKey]*typedEntry{},
		byNS:    map[string]informers.SharedInformerFactory{},
		byName:  map[string]informers.SharedInformerFactory{},
	}
	s.kubeOf = func(namespace string) informers.SharedInformerFactory {
		opts := append(slices.Clone(o.KubeInformerOptions), informers.WithNamespace(namespace))
		return informers.NewSharedInformerFactoryWithOptions(clients.Kube, o.ResyncPeriod, opts...)
	}
	s.named = func(name string) informers.SharedInformerFactory {
		selector := fields.OneTermEqualSelector("metadata.name", name).String()
		opts := append(slices.Clone(o.KubeInformerOptions), informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = selector
		}))
		return informers.NewSharedInformerFactoryWithOptions(clients.Kube, o.ResyncPeriod, opts...)
	}
	s.duck = &duck.CachedInformerFactory{
		Delegate: &duck.MetadataInformerFactory{
			Client:       clients.Metadata,
			Mapper:       clients.RESTMapper,
			ResyncPeriod: o.ResyncPeriod,
		},
		Stop: life.Done(),
	}
	return s
}

// logConversionError is the default report of an object that does not
// convert to its informer's type: the object is skipped, and an operator
// needs to know which one and why.
func (s *InformerSet) logConversionError(u *unstructured.Unstructured, err error) {
	s.logger.Warn("injection: object skipped by informer: does not convert",
		zap.String("apiVersion", u.GetAPIVersion()), zap.String("kind", u.GetKind()),
		zap.String("namespace", u.GetNamespace()), zap.String("name", u.GetName()), zap.Error(err))
}

// KubeInformerFactory returns the set's client-go shared informer factory;
// the package-level KubeInformerFactory(ctx) returns the same.
func (s *InformerSet) KubeInformerFactory() informers.SharedInformerFactory { return s.kube }

// NamespacedKubeInformerFactory returns a client-go shared informer factory
// whose informers watch only namespace, created on first request and run
// with the set's others. It serves what a process reads in its own
// namespace (its certificates Secret, say) with RBAC for that namespace
// alone.
func (s *InformerSet) NamespacedKubeInformerFactory(namespace string) informers.SharedInformerFactory {
	return s.factory(s.byNS, namespace, s.kubeOf)
}

// NamedKubeInformerFactory returns a client-go shared informer factory
// whose informers list and watch only objects named name (a metadata.name
// field selector), created on first request and run with the set's
// others. It serves what a process reads of one cluster-scoped object it
// owns (its MutatingWebhookConfiguration, say) with RBAC limited to that
// object by resourceNames, which allows list and watch only with such a
// selector.
func (s *InformerSet) NamedKubeInformerFactory(name string) informers.SharedInformerFactory {
	return s.factory(s.byName, name, s.named)
}

// factory returns the factory of byKey at key, made with build and kept
// there on first request.
func (s *InformerSet) factory(byKey map[string]informers.SharedInformerFactory, key string, build func(string) informers.SharedInformerFactory) informers.SharedInformerFactory {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := byKey[key]
	if !ok {
		f = build(key)
		byKey[key] = f
	}
	return f
}

// kubeFactories returns the cluster-wide factory, the namespaced ones and
// the named ones. The caller holds s.mu.
func (s *InformerSet) kubeFactories() []informers.SharedInformerFactory {
	out := []informers.SharedInformerFactory{s.kube}
	for _, ns := range slices.Sorted(maps.Keys(s.byNS)) {
		out = append(out, s.byNS[ns])
	}
	for _, name := range slices.Sorted(maps.Keys(s.byName)) {
		out = append(out, s.byName[name])
	}
	return out
}

// DuckInformerFactory returns the set's subject cache: one slim metadata
// informer per resource (duck.MetadataInformerFactory), shared by every
// Binding kind of the process, started on first Get and stopped with the
// set.
func (s *InformerSet) DuckInformerFactory() duck.InformerFactory { return s.duck }

// typedInformer returns the entry for key, creating it with build on first
// request; build runs under the lock so that concurrent requests share one
// informer.
func (s *InformerSet) typedInformer(key typedKey, build func() (cache.SharedIndexInformer, any)) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.typed[key]; ok {
		return e.value
	}
	inf, v := build()
	s.typed[key] = &typedEntry{informer: inf, value: v}
	s.order = append(s.order, key)
	return v
}

// Start runs every informer requested so far that is not running yet: the
// kube factory's and the typed ones. It returns at once; the informers run
// until ctx ends, Shutdown is called, or New's context ends. Informers
// requested after Start wait for the next call to Start. After Shutdown,
// Start does nothing.
func (s *InformerSet) Start(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	// Tie the run to the set's life too, so Shutdown stops informers that
	// were started with a context that never ends.
	context.AfterFunc(s.life, cancel)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		cancel()
		return
	}
	for _, f := range s.kubeFactories() {
		f.StartWithContext(runCtx)
	}
	for _, key := range s.order {
		e := s.typed[key]
		if e.started {
			continue
		}
		e.started = true
		s.wg.Go(func() { e.informer.RunWithContext(runCtx) })
	}
}

// WaitForCacheSync waits until every informer Start has started has synced
// its cache, or ctx ends. The error then wraps context.Cause(ctx) and names
// the informers that had not synced. Informers requested but not started
// are not waited for (they would never sync).
func (s *InformerSet) WaitForCacheSync(ctx context.Context) error {
	type pending struct {
		name     string
		informer cache.SharedIndexInformer
	}
	s.mu.Lock()
	var typed []pending
	for _, key := range s.order {
		if e := s.typed[key]; e.started {
			typed = append(typed, pending{name: key.gvr.String(), informer: e.informer})
		}
	}
	factories := s.kubeFactories()
	s.mu.Unlock()

	var unsynced []string
	var cause error
	for _, f := range factories {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			for typ, synced := range res.Synced {
				if !synced {
					unsynced = append(unsynced, typ.String())
				}
			}
			cause = res.Err
		}
	}
	for _, p := range typed {
		select {
		case <-p.informer.HasSyncedChecker().Done():
		case <-ctx.Done():
		}
		if !p.informer.HasSynced() {
			unsynced = append(unsynced, p.name)
			cause = context.Cause(ctx)
		}
	}
	if len(unsynced) == 0 {
		return nil
	}
	slices.Sort(unsynced)
	return fmt.Errorf("injection: wait for cache sync: not synced: %s: %w", strings.Join(unsynced, ", "), cause)
}

// Shutdown stops every informer the set started (the duck factory's too)
// and waits for the kube and typed informers' goroutines to return. Start
// does nothing afterwards. It is safe to call more than once.
func (s *InformerSet) Shutdown() {
	s.cancel()
	s.mu.Lock()
	s.shutdown = true
	factories := s.kubeFactories()
	s.mu.Unlock()
	for _, f := range factories {
		f.Shutdown()
	}
	s.wg.Wait()
}

// Started reports the resources and types of the informers that Start has
// started, in request order: the kube factory's as their Go type
// ("*v1.Secret"), the typed ones as their resource
// ("example.bindkit.dev/v1alpha1, Resource=widgets"). It is meant for logs
// and tests.
func (s *InformerSet) Started() []string {
	var out []string
	// The kube factory does not say what it started; WaitForCacheSync with
	// an ended context lists exactly the started informers without waiting.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var kube []string
	for typ := range s.kube.WaitForCacheSyncWithContext(done).Synced {
		kube = append(kube, typ.String())
	}
	slices.Sort(kube)
	out = append(out, kube...)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range s.order {
		if s.typed[key].started {
			out = append(out, key.gvr.String())
		}
	}
	return out
}
