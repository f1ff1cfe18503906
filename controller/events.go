package controller

import (
	"context"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/bindkit/bindkit/controller/logging"
)

// NewEventRecorder returns a recorder that writes Kubernetes Events through
// kube, with component as their source, and logs each event at debug level
// to the logger in ctx. It starts the broadcaster's goroutines, which end
// when ctx ends; events recorded after that are dropped.
//
// s resolves the group, version and kind of the objects events are about
// when their TypeMeta is empty, as it is for objects from typed clients:
// pass a scheme that knows your custom types, or nil for client-go's scheme
// of built-in types.
func NewEventRecorder(ctx context.Context, kube kubernetes.Interface, s *runtime.Scheme, component string) record.EventRecorder {
	if s == nil {
		s = scheme.Scheme
	}
	logger := logging.FromContext(ctx).With(zap.String("component", component))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	broadcaster.StartEventWatcher(func(e *corev1.Event) {
		logger.Debug("event",
			zap.String("object", e.InvolvedObject.Kind+" "+keyOf(e.InvolvedObject.Namespace, e.InvolvedObject.Name)),
			zap.String("type", e.Type),
			zap.String("reason", e.Reason),
			zap.String("message", e.Message))
	})
	return broadcaster.NewRecorder(s, corev1.EventSource{Component: component})
}
