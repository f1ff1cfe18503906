package controller

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Enqueue queues the key of obj, a Kubernetes object or a
// cache.DeletedFinalStateUnknown tombstone. Objects without metadata are
// logged and ignored. It has the shape of a HandleAll callback.
func (i *Impl) Enqueue(obj any) {
	i.EnqueueAfter(obj, 0)
}

// EnqueueAfter queues the key of obj (as Enqueue does) to be reconciled
// after d.
func (i *Impl) EnqueueAfter(obj any, d time.Duration) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		i.logger.Error("cannot enqueue object without metadata", zap.String("type", fmt.Sprintf("%T", obj)), zap.Error(err))
		return
	}
	i.EnqueueKeyAfter(key, d)
}

// EnqueueKey queues key ("namespace/name", or "name" for a cluster-scoped
// object). A key already queued and not yet handed to a worker is queued
// once.
func (i *Impl) EnqueueKey(key string) {
	i.EnqueueKeyAfter(key, 0)
}

// EnqueueKeyAfter queues key to be reconciled after d; d of zero or less
// queues it at once.
func (i *Impl) EnqueueKeyAfter(key string, d time.Duration) {
	i.mu.Lock()
	q := i.queue
	if q == nil {
		due := time.Now().Add(d)
		prev, seen := i.pending[key]
		if !seen {
			i.pendingOrder = append(i.pendingOrder, key)
		}
		if !seen || due.Before(prev) {
			i.pending[key] = due
		}
		i.mu.Unlock()
		return
	}
	i.mu.Unlock()
	// A queue that Run has shut down ignores adds, so a late enqueue is
	// dropped rather than reconciled.
	if d <= 0 {
		q.Add(key)
	} else {
		q.AddAfter(key, d)
	}
}

// EnqueueNamespacedName queues the key of nn ("name" when nn.Namespace is
// empty). It is the hook for a tracker: a callback that learns which
// observer to wake as a types.NamespacedName passes it here, so the tracker
// package needs nothing from this one.
func (i *Impl) EnqueueNamespacedName(nn types.NamespacedName) {
	i.EnqueueKey(keyOf(nn.Namespace, nn.Name))
}

// EnqueueSentinel returns a handler that queues key whatever object it is
// given: for a reconciler of one singleton (a webhook configuration, the
// certificate Secret) that must rerun when any of several objects change.
func (i *Impl) EnqueueSentinel(key string) func(obj any) {
	return func(any) { i.EnqueueKey(key) }
}

// EnqueueControllerOf queues the key of the object's controller, the owner
// reference with controller: true. The owner is looked up in obj's
// namespace, which owner references require of a namespaced owner; a
// cluster-scoped obj yields a cluster-scoped key. Objects without a
// controller are ignored.
func (i *Impl) EnqueueControllerOf(obj any) {
	m, ok := metaOf(obj)
	if !ok {
		i.logger.Error("cannot enqueue controller of object without metadata", zap.String("type", fmt.Sprintf("%T", obj)))
		return
	}
	if owner := metav1.GetControllerOfNoCopy(m); owner != nil {
		i.EnqueueKey(keyOf(m.GetNamespace(), owner.Name))
	}
}

// EnqueueLabelOfNamespaceScopedResource returns a handler that queues the
// object named by two labels of the object it is given: nameLabel holds
// the name and namespaceLabel the namespace. With namespaceLabel empty the
// given object's own namespace is used. Objects missing a label are
// ignored.
func (i *Impl) EnqueueLabelOfNamespaceScopedResource(namespaceLabel, nameLabel string) func(obj any) {
	return func(obj any) {
		m, ok := metaOf(obj)
		if !ok {
			return
		}
		labels := m.GetLabels()
		name, ok := labels[nameLabel]
		if !ok {
			return
		}
		ns := m.GetNamespace()
		if namespaceLabel != "" {
			if ns, ok = labels[namespaceLabel]; !ok {
				return
			}
		}
		i.EnqueueKey(keyOf(ns, name))
	}
}

// EnqueueLabelOfClusterScopedResource returns a handler that queues the
// cluster-scoped object whose name is the value of nameLabel on the object
// it is given. Objects without the label are ignored.
func (i *Impl) EnqueueLabelOfClusterScopedResource(nameLabel string) func(obj any) {
	return func(obj any) {
		if m, ok := metaOf(obj); ok {
			if name, ok := m.GetLabels()[nameLabel]; ok {
				i.EnqueueKey(name)
			}
		}
	}
}

// keyOf builds a queue key the way cache.MetaNamespaceKeyFunc does.
func keyOf(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// unwrapTombstone returns the last known object inside a
// DeletedFinalStateUnknown, or obj itself.
func unwrapTombstone(obj any) any {
	switch t := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		return t.Obj
	case *cache.DeletedFinalStateUnknown:
		if t != nil {
			return t.Obj
		}
	}
	return obj
}

// metaOf returns the object metadata of obj, looking inside tombstones.
func metaOf(obj any) (metav1.Object, bool) {
	obj = unwrapTombstone(obj)
	if obj == nil {
		return nil, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	return m, true
}
