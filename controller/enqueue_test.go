package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/controller"
)

func pod(ns, name string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: owners}}
}

func owner(apiVersion, kind, name string, isController bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u-" + types.UID(name), Controller: &isController}
}

func TestEnqueueHelpers(t *testing.T) {
	owned := pod("ns", "web-1", nil, owner("apps/v1", "ReplicaSet", "web", true))
	tests := []struct {
		name    string
		enqueue func(impl *controller.Impl)
		want    map[string]time.Duration // key -> delay
	}{{
		name:    "Enqueue namespaced object",
		enqueue: func(impl *controller.Impl) { impl.Enqueue(pod("ns", "a", nil)) },
		want:    map[string]time.Duration{"ns/a": 0},
	}, {
		name: "Enqueue cluster-scoped object",
		enqueue: func(impl *controller.Impl) {
			impl.Enqueue(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
		},
		want: map[string]time.Duration{"team": 0},
	}, {
		name: "Enqueue tombstone",
		enqueue: func(impl *controller.Impl) {
			impl.Enqueue(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: pod("ns", "gone", nil)})
		},
		want: map[string]time.Duration{"ns/gone": 0},
	}, {
		name:    "Enqueue object without metadata is ignored",
		enqueue: func(impl *controller.Impl) { impl.Enqueue("not an object") },
		want:    map[string]time.Duration{},
	}, {
		name:    "EnqueueKey twice queues once",
		enqueue: func(impl *controller.Impl) { impl.EnqueueKey("ns/k"); impl.EnqueueKey("ns/k") },
		want:    map[string]time.Duration{"ns/k": 0},
	}, {
		name:    "EnqueueAfter delays",
		enqueue: func(impl *controller.Impl) { impl.EnqueueAfter(pod("ns", "a", nil), time.Hour) },
		want:    map[string]time.Duration{"ns/a": time.Hour},
	}, {
		name: "earlier enqueue of the same key wins",
		enqueue: func(impl *controller.Impl) {
			impl.EnqueueKeyAfter("ns/k", time.Hour)
			impl.EnqueueKeyAfter("ns/k", 10*time.Minute)
			impl.EnqueueKeyAfter("ns/k", 30*time.Minute)
		},
		want: map[string]time.Duration{"ns/k": 10 * time.Minute},
	}, {
		name: "EnqueueNamespacedName",
		enqueue: func(impl *controller.Impl) {
			impl.EnqueueNamespacedName(types.NamespacedName{Namespace: "ns", Name: "a"})
			impl.EnqueueNamespacedName(types.NamespacedName{Name: "cluster-wide"})
		},
		want: map[string]time.Duration{"ns/a": 0, "cluster-wide": 0},
	}, {
		name:    "EnqueueSentinel ignores the object",
		enqueue: func(impl *controller.Impl) { impl.EnqueueSentinel("webhook-config")(pod("ns", "a", nil)) },
		want:    map[string]time.Duration{"webhook-config": 0},
	}, {
		name:    "EnqueueControllerOf",
		enqueue: func(impl *controller.Impl) { impl.EnqueueControllerOf(owned) },
		want:    map[string]time.Duration{"ns/web": 0},
	}, {
		name: "EnqueueControllerOf tombstone",
		enqueue: func(impl *controller.Impl) {
			impl.EnqueueControllerOf(cache.DeletedFinalStateUnknown{Key: "ns/web-1", Obj: owned})
		},
		want: map[string]time.Duration{"ns/web": 0},
	}, {
		name: "EnqueueControllerOf skips owners that are not controllers",
		enqueue: func(impl *controller.Impl) {
			impl.EnqueueControllerOf(pod("ns", "a", nil, owner("v1", "ConfigMap", "cm", false)))
			impl.EnqueueControllerOf(pod("ns", "b", nil))
		},
		want: map[string]time.Duration{},
	}, {
		name: "EnqueueLabelOfNamespaceScopedResource",
		enqueue: func(impl *controller.Impl) {
			h := impl.EnqueueLabelOfNamespaceScopedResource("bindkit.dev/ns", "bindkit.dev/name")
			h(pod("ns", "a", map[string]string{"bindkit.dev/ns": "other", "bindkit.dev/name": "binding"}))
			h(pod("ns", "b", map[string]string{"bindkit.dev/name": "no-namespace-label"}))
			h(pod("ns", "c", map[string]string{"bindkit.dev/ns": "other"}))
		},
		want: map[string]time.Duration{"other/binding": 0},
	}, {
		name: "EnqueueLabelOfNamespaceScopedResource in the object's namespace",
		enqueue: func(impl *controller.Impl) {
			impl.EnqueueLabelOfNamespaceScopedResource("", "bindkit.dev/name")(pod("ns", "a", map[string]string{"bindkit.dev/name": "binding"}))
		},
		want: map[string]time.Duration{"ns/binding": 0},
	}, {
		name: "EnqueueLabelOfClusterScopedResource",
		enqueue: func(impl *controller.Impl) {
			h := impl.EnqueueLabelOfClusterScopedResource("bindkit.dev/name")
			h(pod("ns", "a", map[string]string{"bindkit.dev/name": "cluster-binding"}))
			h(pod("ns", "b", nil))
		},
		want: map[string]time.Duration{"cluster-binding": 0},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			impl := controller.NewImpl(controller.ReconcilerFunc(func(context.Context, string) error { return nil }), nil, "enqueue")
			tt.enqueue(impl)
			if diff := cmp.Diff(tt.want, impl.PendingKeys()); diff != "" {
				t.Errorf("queued keys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnqueueBeforeRunKeepsOrder checks that keys enqueued before Run reach
// the reconciler in the order they were first enqueued.
func TestEnqueueBeforeRunKeepsOrder(t *testing.T) {
	var c calls
	impl := controller.NewImpl(controller.ReconcilerFunc(func(_ context.Context, key string) error {
		c.add(key)
		return nil
	}), nil, "order")
	want := []string{"ns/c", "ns/a", "ns/b"}
	for _, key := range want {
		impl.EnqueueKey(key)
	}
	impl.EnqueueKey("ns/a")
	stop := run(t, impl, 1)
	eventually(t, "three reconciles", func() bool { return len(c.get()) == len(want) })
	stop()
	if diff := cmp.Diff(want, c.get()); diff != "" {
		t.Errorf("reconcile order (-want +got):\n%s", diff)
	}
}

// TestHandlersWithFakeInformer wires a filtered HandleAll to a ConfigMap
// informer over a fake clientset and checks which events reach Reconcile.
func TestHandlersWithFakeInformer(t *testing.T) {
	ctx := t.Context()
	kube := fake.NewClientset()
	var c calls
	impl := controller.NewImpl(controller.ReconcilerFunc(func(_ context.Context, key string) error {
		c.add(key)
		return nil
	}), nil, "configmaps")

	factory := informers.NewSharedInformerFactory(kube, 0)
	informer := factory.Core().V1().ConfigMaps().Informer()
	if _, err := informer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: controller.FilterAll(controller.FilterWithNamespace("ns"), controller.FilterWithLabel("app", "web")),
		Handler:    controller.HandleAll(impl.Enqueue),
	}); err != nil {
		t.Fatal(err)
	}
	informerCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	t.Cleanup(func() { stopInformers(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}
	stop := run(t, impl, 1)

	cm := func(ns, name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	web := map[string]string{"app": "web"}
	for _, obj := range []*corev1.ConfigMap{
		cm("ns", "other-label", map[string]string{"app": "db"}),
		cm("elsewhere", "web", web),
		cm("ns", "web", web),
	} {
		if _, err := kube.CoreV1().ConfigMaps(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "create of ns/web", func() bool { return c.count("ns/web") == 1 })
	if err := kube.CoreV1().ConfigMaps("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delete of ns/web", func() bool { return c.count("ns/web") == 2 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Events arrive and are queued in order, so anything the filter let
	// through before ns/web would have been reconciled first.
	if diff := cmp.Diff([]string{"ns/web", "ns/web"}, c.get()); diff != "" {
		t.Errorf("reconciled keys (-want +got):\n%s", diff)
	}
}

func TestFilters(t *testing.T) {
	webPod := pod("ns", "web-1", map[string]string{"app": "web", "tier": "front"}, owner("apps/v1", "ReplicaSet", "web", true))
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/web-1", Obj: webPod}
	clusterObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	selector, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "edge"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]any{
		"pod":        webPod,
		"tombstone":  tombstone,
		"namespace":  clusterObj,
		"bare":       pod("ns", "bare", nil),
		"not-object": 42,
	}
	tests := []struct {
		name   string
		filter func(any) bool
		want   []string // names in objects that pass, sorted
	}{
		{"FilterWithName", controller.FilterWithName("web-1"), []string{"pod", "tombstone"}},
		{"FilterWithNamespace", controller.FilterWithNamespace("ns"), []string{"bare", "pod", "tombstone"}},
		{"FilterWithNamespace cluster-scoped", controller.FilterWithNamespace(""), []string{"namespace"}},
		{"FilterWithNameAndNamespace", controller.FilterWithNameAndNamespace("ns", "bare"), []string{"bare"}},
		{"FilterWithLabel", controller.FilterWithLabel("app", "web"), []string{"pod", "tombstone"}},
		{"FilterWithLabel other value", controller.FilterWithLabel("app", "db"), nil},
		{"FilterWithLabelSelector", controller.FilterWithLabelSelector(selector), []string{"pod", "tombstone"}},
		{"FilterControllerGK", controller.FilterControllerGK(schemaGK("apps", "ReplicaSet")), []string{"pod", "tombstone"}},
		{"FilterControllerGK other group", controller.FilterControllerGK(schemaGK("extensions", "ReplicaSet")), nil},
		{"FilterAll", controller.FilterAll(controller.FilterWithNamespace("ns"), controller.FilterWithName("bare")), []string{"bare"}},
		{"FilterAll of none", controller.FilterAll(), []string{"bare", "namespace", "not-object", "pod", "tombstone"}},
		{"FilterAny", controller.FilterAny(controller.FilterWithName("bare"), controller.FilterWithName("ns")), []string{"bare", "namespace"}},
		{"FilterAny of none", controller.FilterAny(), nil},
		{"FilterNot", controller.FilterNot(controller.FilterWithNamespace("ns")), []string{"namespace", "not-object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for name, obj := range objects {
				if tt.filter(obj) {
					got = append(got, name)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("objects passing (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandleAllUnwrapsTombstones(t *testing.T) {
	p := pod("ns", "a", nil)
	var got []any
	h := controller.HandleAll(func(obj any) { got = append(got, obj) })
	h.OnAdd(p, false)
	h.OnUpdate(pod("ns", "old", nil), p)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: p})
	h.OnDelete(p)
	if diff := cmp.Diff([]any{p, p, p, p}, got); diff != "" {
		t.Errorf("objects seen (-want +got):\n%s", diff)
	}
}
