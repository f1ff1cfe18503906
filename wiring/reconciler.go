package wiring

import (
	"context"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
)

// NewReconcilerImpl completes r with what every Binding kind wires the same
// way and returns the Impl, named name, that runs it:
//
//   - DynamicClient, MetadataClient (when ctx carries one), Mapper and
//     Recorder from ctx (package injection) when they are unset;
//   - Tracker, which enqueues a Binding when a subject it names changes;
//   - Factory, the process's shared subject cache (the slim metadata
//     informers of injection.DuckInformerFactory), with a handler that
//     reports every subject event to the tracker but status-only updates,
//     which reach only the Bindings rolling out (psbinding.NewSubjectEventHandler);
//   - ExcludedNamespaces: ExcludedNamespaces(ctx), so both paths agree on
//     where Bindings never act;
//   - PromoteFunc, so a new leader enqueues every Binding listAll lists;
//   - a handler on bindings, the Bindings' own informer, that enqueues each
//     changed Binding.
//
// Fields already set are kept, so a constructor written field by field, as
// in knative's walkthrough, needs none of this.
func NewReconcilerImpl(ctx context.Context, name string, r *psbinding.BaseReconciler, bindings cache.SharedIndexInformer, listAll psbinding.ListAll) *controller.Impl {
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
	enqueue := func(o tracker.Observer) { impl.EnqueueNamespacedName(o.NamespacedName) }
	if r.Tracker == nil {
		r.Tracker = tracker.New(enqueue, psbinding.DefaultTrackerLease)
	}
	if r.Factory == nil {
		// The process's shared subject cache, with this kind's handler on
		// each informer it uses (once per resource, however often Get is
		// called), so a subject's change reconciles the Bindings tracking
		// it; a status-only change reconciles only those rolling out.
		handler, err := psbinding.NewSubjectEventHandler(psbinding.SubjectEventOptions{
			Tracker: r.Tracker, Notify: enqueue, RollingOut: r.RollingOut,
			OnError: func(err error) { logger.Warn("subject event the tracker cannot read", zap.Error(err)) },
		})
		if err != nil {
			panic(err) // every field is set above
		}
		r.Factory = &duck.EnqueueInformerFactory{Delegate: injection.DuckInformerFactory(ctx), EventHandler: handler}
	}
	if r.ExcludedNamespaces == nil {
		r.ExcludedNamespaces = ExcludedNamespaces(ctx)
	}
	if r.PromoteFunc == nil && listAll != nil {
		r.PromoteFunc = psbinding.PromoteAll(listAll, func(err error) {
			logger.Error("list bindings on promotion", zap.String("controller", name), zap.Error(err))
		})
	}
	bindings.AddEventHandler(psbinding.BindingEventHandler(impl.Enqueue))
	return impl
}

// ExcludedNamespaces returns the namespaces where the process's webhook is
// never called, for BaseReconciler.ExcludedNamespaces: the system namespace
// (when ctx names one, see injection.SystemNamespace) and, unless
// webhook.GetOptions(ctx) lets the webhook be called there,
// psbinding.KubeNamespaces. A reconciler wired field by field that sets its
// ExcludedNamespaces to this acts exactly where admission does.
func ExcludedNamespaces(ctx context.Context) []string {
	excluded := []string{}
	if ns, ok := injection.TrySystemNamespace(ctx); ok {
		excluded = append(excluded, ns)
	}
	if !webhook.GetOptions(ctx).CallInKubeNamespaces {
		excluded = append(excluded, psbinding.KubeNamespaces...)
	}
	return excluded
}
