package wiring_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

func TestNewReconcilerImplFillsOnlyWhatIsUnset(t *testing.T) {
	ctx, fakes := injectiontest.NewContext(t)
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")
	bindings := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.GithubBinding{}, 0, cache.Indexers{})

	r := &psbinding.BaseReconciler{GVR: v1alpha1.GroupVersionResource()}
	impl := wiring.NewReconcilerImpl(ctx, "githubbindings", r, bindings, func() ([]psbinding.Bindable, error) { return nil, nil })
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
	want := append([]string{"bindkit-system"}, psbinding.KubeNamespaces...)
	if diff := cmp.Diff(want, r.ExcludedNamespaces); diff != "" {
		t.Errorf("ExcludedNamespaces (-want +got):\n%s", diff)
	}

	own := tracker.New(func(tracker.Observer) {}, time.Minute)
	r2 := &psbinding.BaseReconciler{GVR: v1alpha1.GroupVersionResource(), Tracker: own, Settings: psbinding.Settings{ExcludedNamespaces: []string{}}}
	wiring.NewReconcilerImpl(ctx, "githubbindings", r2, bindings, nil)
	if r2.Tracker != own {
		t.Error("a Tracker that was set was replaced")
	}
	if r2.ExcludedNamespaces == nil || len(r2.ExcludedNamespaces) != 0 {
		t.Errorf("ExcludedNamespaces set to none was changed to %v", r2.ExcludedNamespaces)
	}
}

func TestExcludedNamespaces(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want []string
	}{{
		name: "system and kube namespaces",
		ctx:  injection.WithSystemNamespace(context.Background(), "bindkit-system"),
		want: append([]string{"bindkit-system"}, psbinding.KubeNamespaces...),
	}, {
		name: "the webhook may be called in the kube namespaces",
		ctx:  webhook.WithOptions(injection.WithSystemNamespace(context.Background(), "ops"), webhook.Options{CallInKubeNamespaces: true}),
		want: []string{"ops"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(injection.SystemNamespaceEnv, "")
			if diff := cmp.Diff(tc.want, wiring.ExcludedNamespaces(tc.ctx)); diff != "" {
				t.Errorf("ExcludedNamespaces (-want +got):\n%s", diff)
			}
		})
	}
}
