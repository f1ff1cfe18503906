package controller

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// HandleAll returns an event handler that calls h with the object of every
// add, the new object of every update and the last known object of every
// delete. h never sees a cache.DeletedFinalStateUnknown: tombstones are
// unwrapped first. Wrap the result in a cache.FilteringResourceEventHandler
// to narrow it:
//
//	informer.AddEventHandler(cache.FilteringResourceEventHandler{
//		FilterFunc: controller.FilterWithLabel("app", "web"),
//		Handler:    controller.HandleAll(impl.Enqueue),
//	})
func HandleAll(h func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    h,
		UpdateFunc: func(_, newObj any) { h(newObj) },
		DeleteFunc: func(obj any) { h(unwrapTombstone(obj)) },
	}
}

// A filter reports whether an informer event's object is of interest. Every
// filter here accepts cache.DeletedFinalStateUnknown tombstones and judges
// the object inside; objects without metadata never pass.

// FilterWithName returns a filter that passes objects named name, in any
// namespace.
func FilterWithName(name string) func(obj any) bool {
	return func(obj any) bool {
		m, ok := metaOf(obj)
		return ok && m.GetName() == name
	}
}

// FilterWithNamespace returns a filter that passes objects in namespace
// (the empty string matches cluster-scoped objects).
func FilterWithNamespace(namespace string) func(obj any) bool {
	return func(obj any) bool {
		m, ok := metaOf(obj)
		return ok && m.GetNamespace() == namespace
	}
}

// FilterWithNameAndNamespace returns a filter that passes the one object
// namespace/name.
func FilterWithNameAndNamespace(namespace, name string) func(obj any) bool {
	return func(obj any) bool {
		m, ok := metaOf(obj)
		return ok && m.GetNamespace() == namespace && m.GetName() == name
	}
}

// FilterWithLabel returns a filter that passes objects whose label key has
// exactly value.
func FilterWithLabel(key, value string) func(obj any) bool {
	return func(obj any) bool {
		m, ok := metaOf(obj)
		if !ok {
			return false
		}
		v, ok := m.GetLabels()[key]
		return ok && v == value
	}
}

// FilterWithLabelSelector returns a filter that passes objects whose labels
// match selector; labels.Everything() passes every object with metadata.
func FilterWithLabelSelector(selector labels.Selector) func(obj any) bool {
	return func(obj any) bool {
		m, ok := metaOf(obj)
		return ok && selector.Matches(labels.Set(m.GetLabels()))
	}
}

// FilterControllerGK returns a filter that passes objects whose controller
// (the owner reference with controller: true) is of group kind gk, in any
// version: use it to react to the children of a kind the controller owns.
func FilterControllerGK(gk schema.GroupKind) func(obj any) bool {
	return func(obj any) bool {
		m, ok := metaOf(obj)
		if !ok {
			return false
		}
		for _, ref := range m.GetOwnerReferences() {
			if ref.Controller == nil || !*ref.Controller {
				continue
			}
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			return err == nil && gv.Group == gk.Group && ref.Kind == gk.Kind
		}
		return false
	}
}

// FilterAll returns a filter that passes objects every filter passes (all
// objects when given none).
func FilterAll(filters ...func(obj any) bool) func(obj any) bool {
	return func(obj any) bool {
		for _, f := range filters {
			if !f(obj) {
				return false
			}
		}
		return true
	}
}

// FilterAny returns a filter that passes objects at least one filter passes
// (none when given none).
func FilterAny(filters ...func(obj any) bool) func(obj any) bool {
	return func(obj any) bool {
		for _, f := range filters {
			if f(obj) {
				return true
			}
		}
		return false
	}
}

// FilterNot returns a filter that passes exactly the objects f rejects,
// objects without metadata included.
func FilterNot(f func(obj any) bool) func(obj any) bool {
	return func(obj any) bool { return !f(obj) }
}
