package configmap_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/configmap"
)

// A constructor under test receives a StaticWatcher; its observers run
// during Watch, with nil for a ConfigMap the test did not give.
func ExampleStaticWatcher() {
	w := configmap.NewStaticWatcher(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "config-logging"},
		Data:       map[string]string{"loglevel.demo": "debug"},
	})
	w.Watch("config-logging", func(cm *corev1.ConfigMap) {
		fmt.Println("loglevel:", cm.Data["loglevel.demo"])
	})
	w.Watch("config-features", func(cm *corev1.ConfigMap) {
		fmt.Println("features present:", cm != nil)
	})
	// Output:
	// loglevel: debug
	// features present: false
}
