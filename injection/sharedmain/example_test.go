package sharedmain_test

import (
	"context"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

// NewConfigMapController reconciles the ConfigMaps of every namespace. It
// requests its informer from the context and starts nothing.
func NewConfigMapController(ctx context.Context, cmw configmap.Watcher) *controller.Impl {
	logger := logging.FromContext(ctx)
	impl := controller.NewImpl(controller.ReconcilerFunc(func(ctx context.Context, key string) error {
		logging.FromContext(ctx).Info("reconciled", zap.String("configMap", key))
		return nil
	}), logger, "configmaps")
	injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps().Informer().
		AddEventHandler(controller.HandleAll(impl.Enqueue))
	return impl
}

// A binary's whole main: run with, for example,
//
//	SYSTEM_NAMESPACE=demo ./controller --kubeconfig ~/.kube/config --disable-ha
func ExampleMain() {
	sharedmain.Main("demo-controller", NewConfigMapController)
}
