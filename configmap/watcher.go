package configmap

import corev1 "k8s.io/api/core/v1"

// Observer is told the current content of a watched ConfigMap: once when the
// watcher starts and again after every change. It must return quickly.
type Observer func(*corev1.ConfigMap)

// Watcher calls observers with the ConfigMaps they watch. Watch is called by
// controller constructors, before the watcher starts.
type Watcher interface {
	// Watch registers observers for the ConfigMap called name in the system
	// namespace.
	Watch(name string, observers ...Observer)
}
