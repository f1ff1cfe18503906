package declarative_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
)

// A declarative Spec is what a Binding adds, as data: Do merges it into a
// pod template (env entries into every container, by name), Undo takes
// it back out, leaving what the workload had.
func ExampleSpec() {
	spec := declarative.Spec{Env: []corev1.EnvVar{{Name: "K_SINK", Value: "http://events.example.com"}}}
	wp := &duck.WithPod{}
	wp.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}}}}

	spec.Do(wp)
	fmt.Println(wp.Spec.Template.Spec.Containers[0].Env)
	spec.Undo(wp)
	fmt.Println(wp.Spec.Template.Spec.Containers[0].Env)
	// Output:
	// [{LOG_LEVEL info nil} {K_SINK http://events.example.com nil}]
	// [{LOG_LEVEL info nil}]
}
