package metrics

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The psbinding.Observer methods of Controllers' observer: a
// BaseReconciler finds them on the controller.Observer of its reconcile's
// context. They count subject patches and conflicts and keep the number
// of subjects bound, all by Binding resource. (This package does not
// import psbinding, so psbinding's tests may run a process.)

// SubjectPatched implements psbinding.Observer.
func (o controllerObserver) SubjectPatched(binding schema.GroupResource, bind bool) {
	action := actionUnbind
	if bind {
		action = actionBind
	}
	o.m.subjectPatches.WithLabelValues(binding.String(), action).Inc()
}

// SubjectConflict implements psbinding.Observer.
func (o controllerObserver) SubjectConflict(binding schema.GroupResource) {
	o.m.subjectConflicts.WithLabelValues(binding.String()).Inc()
}

// SubjectsBound implements psbinding.Observer. The gauge of a resource is
// the sum over its Bindings of what each last reported; the per-Binding
// counts are kept here, never as labels, and a Binding that reports 0 is
// forgotten.
func (o controllerObserver) SubjectsBound(binding schema.GroupResource, key types.NamespacedName, n int) {
	m := o.m
	m.boundMu.Lock()
	defer m.boundMu.Unlock()
	perBinding := m.bound[binding]
	if perBinding == nil {
		perBinding = map[types.NamespacedName]int{}
		m.bound[binding] = perBinding
	}
	delta := n - perBinding[key]
	if n > 0 {
		perBinding[key] = n
	} else {
		delete(perBinding, key)
	}
	m.subjectsBound.WithLabelValues(binding.String()).Add(float64(delta))
}

// RolloutWave implements psbinding.RolloutObserver.
func (o controllerObserver) RolloutWave(binding schema.GroupResource) {
	o.m.rolloutEvents.WithLabelValues(binding.String(), eventWave).Inc()
}

// RolloutHalted implements psbinding.RolloutObserver.
func (o controllerObserver) RolloutHalted(binding schema.GroupResource) {
	o.m.rolloutEvents.WithLabelValues(binding.String(), eventHalt).Inc()
}

// RolloutRolledBack implements psbinding.RolloutObserver: n subjects.
func (o controllerObserver) RolloutRolledBack(binding schema.GroupResource, n int) {
	o.m.rolloutEvents.WithLabelValues(binding.String(), eventRollback).Add(float64(n))
}

// RolloutControl implements psbinding.RolloutControlObserver: an
// operator's control, counted as a rollout event.
func (o controllerObserver) RolloutControl(binding schema.GroupResource, control string) {
	o.m.rolloutEvents.WithLabelValues(binding.String(), control).Inc()
}

// RolloutState implements psbinding.RolloutControlObserver. The gauge of
// a resource and state counts the Bindings whose last reported state it
// is; each Binding's state is kept here, never as a label, and one that
// reports "" is forgotten.
func (o controllerObserver) RolloutState(binding schema.GroupResource, key types.NamespacedName, state string) {
	m := o.m
	m.boundMu.Lock()
	defer m.boundMu.Unlock()
	perBinding := m.states[binding]
	old := perBinding[key]
	if old == state {
		return
	}
	if old != "" {
		m.rollouts.WithLabelValues(binding.String(), old).Dec()
	}
	if state == "" {
		delete(perBinding, key)
		return
	}
	if perBinding == nil {
		perBinding = map[types.NamespacedName]string{}
		m.states[binding] = perBinding
	}
	perBinding[key] = state
	m.rollouts.WithLabelValues(binding.String(), state).Inc()
}

// WebhookScoped implements psbinding.AdmissionObserver: the namespaces the
// selector names, and a count of each time it falls back to every
// namespace.
func (o controllerObserver) WebhookScoped(configuration string, namespaces int, allNamespaces bool) {
	m := o.m
	m.boundMu.Lock()
	defer m.boundMu.Unlock()
	if allNamespaces && !m.fellBack[configuration] {
		m.selectorFallbacks.WithLabelValues(configuration).Inc()
	}
	m.fellBack[configuration] = allNamespaces
	if allNamespaces {
		namespaces = 0
	}
	m.selectorNamespaces.WithLabelValues(configuration).Set(float64(namespaces))
}
