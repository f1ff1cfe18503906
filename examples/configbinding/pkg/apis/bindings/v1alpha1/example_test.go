package v1alpha1_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
)

func ExampleConfigBinding_Do() {
	b := &v1alpha1.ConfigBinding{Spec: v1alpha1.ConfigBindingSpec{Data: map[string]string{"LOG_LEVEL": "debug"}}}
	wp := &duck.WithPod{}
	wp.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}

	// The reconciler and the webhook prepare this context with
	// configbinding.WithContext.
	ctx := v1alpha1.WithConfigMapName(context.Background(), "configbinding-cfg")
	b.Do(ctx, wp)
	fmt.Println(wp.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
	// Output:
	// configbinding-cfg
}
