// Package injection carries a process's clients and informers in a
// context.Context, built explicitly by main or by a test.
//
// Unlike knative.dev/pkg there is no init() registration and there are no
// generated accessor packages: what a binary runs is what its main passes
// in. main builds one context with New (a test with
// injectiontest.NewContext), hands it to each controller constructor, of
// the form
//
//	func NewController(ctx context.Context, cmw configmap.Watcher) *controller.Impl
//
// and each constructor reads what it needs back out: Config, KubeClient,
// DynamicClient, RESTMapper, KubeInformerFactory, DuckInformerFactory, or a
// typed informer for a custom resource through TypedInformerFor. The logger
// is the one of package controller/logging (logging.FromContext).
//
// # Missing values
//
// A getter whose value was never set panics with a message that names the
// setup to call, e.g.
//
//	injection: no kube client in context; build the context with injection.New or injection.WithKubeClient
//
// A missing client is a wiring mistake found the first time the binary or
// test runs, not a condition to handle. Code for which a value is optional
// uses the TryX variants, which report false instead.
//
// # Informers
//
// Informers start only if something asked for them. A constructor requests
// them (KubeInformerFactory(ctx).Core().V1().Secrets().Informer(),
// TypedInformerFor[Widget](ctx, gvr)) and starts nothing; main then starts
// all of them at once and waits for their caches, bounded by its context:
//
//	ctx, informers, err := injection.New(ctx, cfg, injection.Options{})
//	impl := NewController(ctx, cmw)
//	informers.Start(ctx)
//	if err := informers.WaitForCacheSync(ctx); err != nil { ... }
//	impl.Run(ctx)
//
// The duck informer factory is the exception: it is the subject cache, one
// slim metadata informer per resource (duck.MetadataInformerFactory)
// shared by every Binding kind, for whatever resources Bindings name at run
// time, so each starts on its first Get (which waits for its cache), as
// duck.CachedInformerFactory does. Every informer stops when the context
// given to New ends or on InformerSet.Shutdown.
//
// # Typed informers for custom resources
//
// TypedInformer lists and watches a resource through the dynamic client and
// converts each object to a Go type, so a custom resource needs no generated
// clientset, informer or lister. An object that does not convert is
// reported (logged, for informers from TypedInformerFor) and left out of
// the cache; it never panics the informer.
package injection
