package psbinding

import (
	"context"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
)

// DefaultTrackerLease is how long a Binding's interest in its subjects
// lasts without a reconcile renewing it. Every reconcile renews it, and
// sharedmain's informers resync every few hours, but a process wired
// without resync reconciles a Binding nobody touches only once: the lease
// must outlive any quiet spell, or later subject changes would go
// unnoticed. A stale registration (a subject the Binding no longer names)
// costs one no-op reconcile per change of that subject, with no request.
const DefaultTrackerLease = 10 * 365 * 24 * time.Hour

// NewReconcilerImpl completes r with what every Binding kind wires the same
// way and returns the Impl, named name, that runs it:
//
//   - DynamicClient, MetadataClient (when ctx carries one), Mapper and
//     Recorder from ctx (package injection) when they are unset;
//   - Tracker, which enqueues a Binding when a subject it names changes;
//   - Factory, the process's shared subject cache (the slim metadata
//     informers of injection.DuckInformerFactory), with a handler that
//     reports every subject event to the tracker;
//   - ExcludedNamespaces: the system namespace and, unless the webhook may
//     be called there (webhook.GetOptions), KubeNamespaces, so both paths
//     agree on where Bindings never act;
//   - PromoteFunc, so a new leader enqueues every Binding listAll lists;
//   - a handler on bindings, the Bindings' own informer, that enqueues each
//     changed Binding.
//
// Fields already set are kept, so a constructor written field by field, as
// in knative's walkthrough, needs none of this.
func NewReconcilerImpl(ctx context.Context, name string, r *BaseReconciler, bindings cache.SharedIndexInformer, listAll ListAll) *controller.Impl {
	logger := logging.FromContext(ctx)
	if r.DynamicClient == nil {
		r.DynamicClient = injection.DynamicClient(ctx)
	}
	if r.MetadataClient == nil {
		r.MetadataClient, _ = injection.TryMetadataClient(ctx)
	}
	if r.Mapper == nil {
		r.Mapper = injection.RESTMapper(ctx)
	}
	if r.Recorder == nil {
		r.Recorder = controller.NewEventRecorder(ctx, injection.KubeClient(ctx), nil, name)
	}
	impl := controller.NewImpl(r, logger, name)
	if r.Tracker == nil {
		r.Tracker = tracker.New(func(o tracker.Observer) { impl.EnqueueNamespacedName(o.NamespacedName) }, DefaultTrackerLease)
	}
	if r.Factory == nil {
		// The process's shared subject cache, with this kind's handler on
		// each informer it uses (once per resource, however often Get is
		// called), so a subject's change reconciles the Bindings tracking it.
		r.Factory = &duck.EnqueueInformerFactory{
			Delegate: injection.DuckInformerFactory(ctx),
			EventHandler: SubjectEventHandler(r.Tracker, func(err error) {
				logger.Warn("subject event the tracker cannot read", zap.Error(err))
			}),
		}
	}
	if r.ExcludedNamespaces == nil {
		// Where the webhook is never called, the reconciler never acts.
		if ns, ok := injection.TrySystemNamespace(ctx); ok {
			r.ExcludedNamespaces = append(r.ExcludedNamespaces, ns)
		}
		if !webhook.GetOptions(ctx).CallInKubeNamespaces {
			r.ExcludedNamespaces = append(r.ExcludedNamespaces, KubeNamespaces...)
		}
	}
	if r.PromoteFunc == nil {
		r.PromoteFunc = PromoteAll(listAll, func(err error) {
			logger.Error("list bindings on promotion", zap.String("controller", name), zap.Error(err))
		})
	}
	bindings.AddEventHandler(BindingEventHandler(impl.Enqueue))
	return impl
}
