package psbinding

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/tracker"
)

func TestNewReconcilerImplFillsOnlyWhatIsUnset(t *testing.T) {
	ctx, fakes := injectiontest.NewContext(t)
	bindings := cache.NewSharedIndexInformer(&cache.ListWatch{}, &envBinding{}, 0, cache.Indexers{})

	r := &BaseReconciler{GVR: envBindingsGVR}
	impl := NewReconcilerImpl(ctx, "envbindings", r, bindings, func() ([]Bindable, error) { return nil, nil })
	if impl.Reconciler() != controller.Reconciler(r) {
		t.Errorf("Impl reconciles %T, want the BaseReconciler given", impl.Reconciler())
	}
	for name, unset := range map[string]bool{
		"DynamicClient": r.DynamicClient == nil, "Mapper": r.Mapper == nil, "Recorder": r.Recorder == nil,
		"Tracker": r.Tracker == nil, "Factory": r.Factory == nil, "PromoteFunc": r.PromoteFunc == nil,
	} {
		if unset {
			t.Errorf("%s left unset", name)
		}
	}
	if r.DynamicClient != fakes.Dynamic {
		t.Error("DynamicClient is not the context's")
	}

	own := tracker.New(func(tracker.Observer) {}, time.Minute)
	r2 := &BaseReconciler{GVR: envBindingsGVR, Tracker: own}
	NewReconcilerImpl(ctx, "envbindings", r2, bindings, nil)
	if r2.Tracker != own {
		t.Error("a Tracker that was set was replaced")
	}
}
