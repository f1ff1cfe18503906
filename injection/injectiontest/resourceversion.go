package injectiontest

import (
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
)

// versioned is an ObjectTracker that, like the API server, gives every
// object it stores through Create, Update or Patch a new resourceVersion,
// from a counter both fake clients share, so a client that guards a write
// with the resourceVersion it read (a JSON patch "test", say) sees what it
// would see on a server. client-go's trackers keep whatever the object
// came with, often nothing. Optimistic concurrency itself is not
// emulated: an update with a stale resourceVersion still goes through.
// Server-side apply passes through unchanged.
type versioned struct {
	clienttesting.ObjectTracker
	counter *atomic.Int64
}

// stamp sets a new resourceVersion on obj, or on a copy of obj when
// copied is set (for objects that belong to the client's caller).
func (v *versioned) stamp(obj runtime.Object, copied bool) (runtime.Object, error) {
	if copied {
		obj = obj.DeepCopyObject()
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatInt(v.counter.Add(1), 10))
	return obj, nil
}

func (v *versioned) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	obj, err := v.stamp(obj, true)
	if err != nil {
		return err
	}
	return v.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (v *versioned) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	obj, err := v.stamp(obj, true)
	if err != nil {
		return err
	}
	return v.ObjectTracker.Update(gvr, obj, ns, opts...)
}

// Patch stamps obj itself: ObjectReaction built it from the stored object
// and returns it to the client as the patch's result.
func (v *versioned) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	obj, err := v.stamp(obj, false)
	if err != nil {
		return err
	}
	return v.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

// versionWrites makes every write through fake go through a versioned
// tracker over its own.
func versionWrites(fake interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	Tracker() clienttesting.ObjectTracker
}, counter *atomic.Int64) {
	fake.PrependReactor("*", "*", clienttesting.ObjectReaction(&versioned{ObjectTracker: fake.Tracker(), counter: counter}))
}
