package tracker

import (
	"errors"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrNoKind is wrapped by the errors of OnChanged, GetObservers and
// ObserverFor when neither the caller nor the object says what kind the
// object is. Typed objects from informers usually have an empty TypeMeta;
// pass their kind explicitly (OnChangedKind, GetObserversKind).
var ErrNoKind = errors.New("object carries no kind")

// ErrNotObject is wrapped when a value handed to the tracker is neither a
// metav1.Object nor a tombstone holding one.
var ErrNotObject = errors.New("not a Kubernetes object")

// object is what the tracker needs to know about a changed object.
type object struct {
	gk        schema.GroupKind
	namespace string
	name      string
	labels    map[string]string
}

// kinded is the part of runtime.Object that reports the object's own
// apiVersion and kind; unstructured objects and typed objects with TypeMeta
// set implement it.
type kinded interface {
	GetObjectKind() schema.ObjectKind
}

// identify resolves obj to the object it stands for. obj is a
// metav1.Object, or a tombstone (a struct, or pointer to one, with an
// exported interface field Obj, the shape of client-go's
// cache.DeletedFinalStateUnknown) whose Obj is one. gk, when its Kind is set,
// is the kind the caller vouches for; otherwise the object's own kind is
// used. The two must agree when both are known, so a wrong explicit kind is
// an error rather than a silent miss.
func identify(gk schema.GroupKind, obj any) (object, error) {
	if gk.Kind == "" && gk.Group != "" {
		return object{}, fmt.Errorf("tracker: explicit kind %q has a group but no kind", gk.String())
	}
	obj = unwrapTombstone(obj)
	m, ok := obj.(metav1.Object)
	if !ok || isNilPointer(obj) {
		return object{}, fmt.Errorf("tracker: %T: %w", obj, ErrNotObject)
	}
	var own schema.GroupKind
	if k, ok := obj.(kinded); ok {
		if ko := k.GetObjectKind(); ko != nil {
			own = ko.GroupVersionKind().GroupKind()
		}
	}
	switch {
	case gk.Kind == "" && own.Kind == "":
		return object{}, fmt.Errorf("tracker: %T %s/%s: %w; pass its kind explicitly",
			obj, m.GetNamespace(), m.GetName(), ErrNoKind)
	case gk.Kind == "":
		gk = own
	case own.Kind != "" && own != gk:
		return object{}, fmt.Errorf("tracker: %s %s/%s: object says it is a %s",
			gk.String(), m.GetNamespace(), m.GetName(), own.String())
	}
	return object{gk: gk, namespace: m.GetNamespace(), name: m.GetName(), labels: m.GetLabels()}, nil
}

// unwrapTombstone returns the last known object inside a tombstone, or obj
// itself. The shape is matched by reflection so that this package need not
// import client-go.
func unwrapTombstone(obj any) any {
	if _, ok := obj.(metav1.Object); ok {
		return obj
	}
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return obj
	}
	f := v.FieldByName("Obj")
	if !f.IsValid() || f.Kind() != reflect.Interface || !f.CanInterface() {
		return obj
	}
	return f.Interface()
}

// isNilPointer catches typed nil pointers, whose accessors would panic.
func isNilPointer(obj any) bool {
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
