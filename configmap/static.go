package configmap

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// StaticWatcher is a Watcher over fixed ConfigMaps, for unit tests of
// controller constructors: Watch calls the new observers at once with the
// ConfigMap of that name, or nil when none was given, and never again.
// Namespaces are ignored; names must be unique. It is safe for concurrent
// use.
type StaticWatcher struct {
	mu  sync.Mutex
	cms map[string]*corev1.ConfigMap
}

var _ Watcher = (*StaticWatcher)(nil)

// NewStaticWatcher returns a StaticWatcher serving cms by name. It panics
// on a nil ConfigMap or two with the same name: a test setup mistake.
func NewStaticWatcher(cms ...*corev1.ConfigMap) *StaticWatcher {
	w := &StaticWatcher{cms: make(map[string]*corev1.ConfigMap, len(cms))}
	for i, cm := range cms {
		if cm == nil {
			panic(fmt.Sprintf("configmap.NewStaticWatcher: ConfigMap %d is nil", i))
		}
		if _, dup := w.cms[cm.Name]; dup {
			panic("configmap.NewStaticWatcher: two ConfigMaps named " + cm.Name)
		}
		w.cms[cm.Name] = cm
	}
	return w
}

// Watch calls observers with the ConfigMap called name, or nil when the
// watcher holds none by that name, before it returns.
func (w *StaticWatcher) Watch(name string, observers ...Observer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cm := w.cms[name]
	for _, o := range observers {
		o(cm)
	}
}
