package controllerruntime

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// trackedRegisterer registers collectors with a registry and remembers
// them, so that a Manager that stops takes bindkit's metrics out of the
// registry (controller-runtime's is process-wide) and the next Manager of
// the process, in a test, can register them again.
type trackedRegisterer struct {
	reg        prometheus.Registerer
	mu         sync.Mutex
	registered []prometheus.Collector
}

func (r *trackedRegisterer) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.registered = append(r.registered, c)
	r.mu.Unlock()
	return nil
}

func (r *trackedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *trackedRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// unregisterAll takes every collector registered through r out of the
// registry.
func (r *trackedRegisterer) unregisterAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.registered {
		r.reg.Unregister(c)
	}
	r.registered = nil
}
