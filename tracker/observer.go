package tracker

import (
	"cmp"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Observer identifies an object that depends on others, for example a
// Binding that depends on its subjects. GroupKind is part of the identity:
// observers of different kinds with the same namespace and name are distinct.
type Observer struct {
	// GroupKind is the observer's kind, e.g. {Group: "bindkit.dev", Kind: "EnvBinding"}.
	GroupKind schema.GroupKind
	// NamespacedName names the observer; Namespace is empty for a
	// cluster-scoped observer.
	types.NamespacedName
}

// String formats o for logs and errors: "EnvBinding.bindkit.dev default/gh".
func (o Observer) String() string {
	return o.GroupKind.String() + " " + o.NamespacedName.String()
}

// Validate reports every problem with o, joined, or nil when o is usable.
func (o Observer) Validate() error {
	var errs []error
	if o.GroupKind.Kind == "" {
		errs = append(errs, errors.New("observer kind is required"))
	}
	if o.Name == "" {
		errs = append(errs, errors.New("observer name is required"))
	}
	return errors.Join(errs...)
}

// ObserverFor returns the Observer that stands for obj. obj is accepted in
// the same forms as by Interface.OnChanged (a metav1.Object or a tombstone
// holding one). gk is the observer's kind; leave it zero to take the kind
// the object carries. It is an error when neither gives a kind, or when both
// do and they differ.
func ObserverFor(gk schema.GroupKind, obj any) (Observer, error) {
	o, err := identify(gk, obj)
	if err != nil {
		return Observer{}, fmt.Errorf("observer: %w", err)
	}
	return Observer{GroupKind: o.gk, NamespacedName: types.NamespacedName{Namespace: o.namespace, Name: o.name}}, nil
}

// compareObservers orders observers by group, kind, namespace and name, the
// order in which the tracker reports them.
func compareObservers(a, b Observer) int {
	return cmp.Or(
		cmp.Compare(a.GroupKind.Group, b.GroupKind.Group),
		cmp.Compare(a.GroupKind.Kind, b.GroupKind.Kind),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
	)
}
