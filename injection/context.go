package injection

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/duck"
)

// Context keys are unexported types so that only this package can set or
// read the values, and no two keys can collide.
type (
	configKey      struct{}
	kubeClientKey  struct{}
	dynamicKey     struct{}
	metadataKey    struct{}
	duckFactoryKey struct{}
	restMapperKey  struct{}
	informerSetKey struct{}
)

// lookup returns the value stored under key, and false when there is none
// or it is nil (a typed nil counts as nil: a nil *rest.Config is no config).
func lookup[V any](ctx context.Context, key any) (V, bool) {
	v, ok := ctx.Value(key).(V)
	if !ok || isNil(v) {
		var zero V
		return zero, false
	}
	return v, true
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// mustLookup is lookup that panics, naming what is missing and the
// function that would have put it there: a missing client is a wiring
// mistake in main or in a test, found on the first run, never a condition
// to handle at run time.
func mustLookup[V any](ctx context.Context, key any, what, setter string) V {
	v, ok := lookup[V](ctx, key)
	if !ok {
		panic(fmt.Sprintf("injection: no %s in context; build the context with injection.New or injection.%s", what, setter))
	}
	return v
}

// WithConfig returns a copy of ctx that carries cfg, the configuration every
// client of the process was built from. A nil cfg makes Config panic as if
// none were set.
func WithConfig(ctx context.Context, cfg *rest.Config) context.Context {
	return context.WithValue(ctx, configKey{}, cfg)
}

// Config returns the *rest.Config stored by New or WithConfig. It panics
// with a message naming both when ctx carries none.
func Config(ctx context.Context) *rest.Config {
	return mustLookup[*rest.Config](ctx, configKey{}, "rest config", "WithConfig")
}

// TryConfig is Config that reports a missing config instead of panicking.
func TryConfig(ctx context.Context) (*rest.Config, bool) {
	return lookup[*rest.Config](ctx, configKey{})
}

// WithKubeClient returns a copy of ctx that carries client, the typed
// clientset for built-in kinds.
func WithKubeClient(ctx context.Context, client kubernetes.Interface) context.Context {
	return context.WithValue(ctx, kubeClientKey{}, client)
}

// KubeClient returns the clientset stored by New or WithKubeClient. It
// panics with a message naming both when ctx carries none.
func KubeClient(ctx context.Context) kubernetes.Interface {
	return mustLookup[kubernetes.Interface](ctx, kubeClientKey{}, "kube client", "WithKubeClient")
}

// TryKubeClient is KubeClient that reports a missing client instead of
// panicking.
func TryKubeClient(ctx context.Context) (kubernetes.Interface, bool) {
	return lookup[kubernetes.Interface](ctx, kubeClientKey{})
}

// WithDynamicClient returns a copy of ctx that carries client, the dynamic
// client for custom resources and duck-typed access.
func WithDynamicClient(ctx context.Context, client dynamic.Interface) context.Context {
	return context.WithValue(ctx, dynamicKey{}, client)
}

// DynamicClient returns the dynamic client stored by New or
// WithDynamicClient. It panics with a message naming both when ctx carries
// none.
func DynamicClient(ctx context.Context) dynamic.Interface {
	return mustLookup[dynamic.Interface](ctx, dynamicKey{}, "dynamic client", "WithDynamicClient")
}

// TryDynamicClient is DynamicClient that reports a missing client instead
// of panicking.
func TryDynamicClient(ctx context.Context) (dynamic.Interface, bool) {
	return lookup[dynamic.Interface](ctx, dynamicKey{})
}

// WithMetadataClient returns a copy of ctx that carries client, which reads
// and patches any resource as metadata only (small responses).
func WithMetadataClient(ctx context.Context, client metadata.Interface) context.Context {
	return context.WithValue(ctx, metadataKey{}, client)
}

// MetadataClient returns the metadata client stored by New or
// WithMetadataClient. It panics with a message naming both when ctx
// carries none.
func MetadataClient(ctx context.Context) metadata.Interface {
	return mustLookup[metadata.Interface](ctx, metadataKey{}, "metadata client", "WithMetadataClient")
}

// TryMetadataClient is MetadataClient that reports a missing client instead
// of panicking.
func TryMetadataClient(ctx context.Context) (metadata.Interface, bool) {
	return lookup[metadata.Interface](ctx, metadataKey{})
}

// WithRESTMapper returns a copy of ctx that carries mapper, which turns
// kinds into the resources the server serves them under.
func WithRESTMapper(ctx context.Context, mapper meta.RESTMapper) context.Context {
	return context.WithValue(ctx, restMapperKey{}, mapper)
}

// RESTMapper returns the mapper stored by New (a discovery-backed
// duck.RESTMapper) or WithRESTMapper. It panics with a message naming both
// when ctx carries none.
func RESTMapper(ctx context.Context) meta.RESTMapper {
	return mustLookup[meta.RESTMapper](ctx, restMapperKey{}, "REST mapper", "WithRESTMapper")
}

// TryRESTMapper is RESTMapper that reports a missing mapper instead of
// panicking.
func TryRESTMapper(ctx context.Context) (meta.RESTMapper, bool) {
	return lookup[meta.RESTMapper](ctx, restMapperKey{})
}

// WithDuckInformerFactory returns a copy of ctx that carries factory, which
// hands out the subjects' informers by resource. A test can use it to
// replace the factory New put in.
func WithDuckInformerFactory(ctx context.Context, factory duck.InformerFactory) context.Context {
	return context.WithValue(ctx, duckFactoryKey{}, factory)
}

// DuckInformerFactory returns the factory stored by New or
// WithDuckInformerFactory. The one New stores is the process's subject
// cache, a duck.CachedInformerFactory over a duck.MetadataInformerFactory:
// one slim metadata informer per resource for the whole process, shared by
// every Binding kind, started by its first Get, which also waits for its
// cache to sync; so call Get from a reconciler, not from a controller
// constructor. It panics with a message naming both setters when ctx
// carries none.
func DuckInformerFactory(ctx context.Context) duck.InformerFactory {
	return mustLookup[duck.InformerFactory](ctx, duckFactoryKey{}, "duck informer factory", "WithDuckInformerFactory")
}

// TryDuckInformerFactory is DuckInformerFactory that reports a missing
// factory instead of panicking.
func TryDuckInformerFactory(ctx context.Context) (duck.InformerFactory, bool) {
	return lookup[duck.InformerFactory](ctx, duckFactoryKey{})
}

// WithInformers returns a copy of ctx that carries set, the informers the
// process starts together. New and NewWithClients call it.
func WithInformers(ctx context.Context, set *InformerSet) context.Context {
	return context.WithValue(ctx, informerSetKey{}, set)
}

// Informers returns the InformerSet stored by New or WithInformers. It
// panics with a message naming both when ctx carries none.
func Informers(ctx context.Context) *InformerSet {
	return mustLookup[*InformerSet](ctx, informerSetKey{}, "informer set", "WithInformers")
}

// TryInformers is Informers that reports a missing set instead of
// panicking.
func TryInformers(ctx context.Context) (*InformerSet, bool) {
	return lookup[*InformerSet](ctx, informerSetKey{})
}

// KubeInformerFactory returns the client-go shared informer factory of the
// InformerSet in ctx. A controller constructor asks it for the informers it
// needs (factory.Core().V1().Secrets().Informer(), or .Lister()); only those
// start, when main calls InformerSet.Start. There is no setter of its own:
// a factory the set does not own would never be started. It panics, naming
// New and WithInformers, when ctx carries no InformerSet.
func KubeInformerFactory(ctx context.Context) informers.SharedInformerFactory {
	return mustLookup[*InformerSet](ctx, informerSetKey{}, "informer set (for the kube informer factory)", "WithInformers").kube
}

// NamespacedKubeInformerFactory returns the set's informer factory scoped
// to namespace (see InformerSet.NamespacedKubeInformerFactory). It panics
// when ctx carries no informer set.
func NamespacedKubeInformerFactory(ctx context.Context, namespace string) informers.SharedInformerFactory {
	return mustLookup[*InformerSet](ctx, informerSetKey{}, "informer set (for a namespaced kube informer factory)", "WithInformers").NamespacedKubeInformerFactory(namespace)
}

// NamedKubeInformerFactory returns the set's informer factory limited to
// objects named name (see InformerSet.NamedKubeInformerFactory). It panics
// when ctx carries no informer set.
func NamedKubeInformerFactory(ctx context.Context, name string) informers.SharedInformerFactory {
	return mustLookup[*InformerSet](ctx, informerSetKey{}, "informer set (for a named kube informer factory)", "WithInformers").NamedKubeInformerFactory(name)
}
