package tracker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// TestTrackerWithRealAPIServerInformers drives the tracker from a duck
// informer on Deployments of the real kube-apiserver: a change to a tracked
// Deployment, and a new Deployment that matches a tracked selector, each
// reach exactly the observer that tracks them.
func TestTrackerWithRealAPIServerInformers(t *testing.T) {
	env := controlPlane.Env(t)
	ns := env.CreateNamespace(t, "tracker-")
	kube := kubernetes.NewForConfigOrDie(env.Config)

	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	trk := tracker.New(func(o tracker.Observer) {
		mu.Lock()
		seen[o.Name]++
		mu.Unlock()
	}, time.Hour)
	binding := schema.GroupKind{Group: "test.bindkit.dev", Kind: "EnvBinding"}
	observer := func(name string) tracker.Observer {
		return tracker.Observer{GroupKind: binding, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	if err := trk.TrackReference(tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}, observer("by-name")); err != nil {
		t.Fatal(err)
	}
	if err := trk.TrackReference(tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}, observer("by-selector")); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	// The subject cache as a process has it: slim metadata, kind set.
	factory := &duck.EnqueueInformerFactory{
		Delegate: &duck.CachedInformerFactory{Stop: stop, Delegate: &duck.MetadataInformerFactory{
			Client: metadata.NewForConfigOrDie(env.Config),
			Mapper: duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config)),
		}},
		EventHandler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { mustOnChanged(t, trk, obj) },
			UpdateFunc: func(_, obj any) { mustOnChanged(t, trk, obj) },
		},
	}
	if _, _, err := factory.Get(t.Context(), schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}); err != nil {
		t.Fatal(err)
	}

	waitSeen := func(want map[string]int) {
		t.Helper()
		var got map[string]int
		err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			mu.Lock()
			got = map[string]int{}
			for k, v := range seen {
				got[k] = v
			}
			mu.Unlock()
			return cmp.Equal(want, got), nil
		})
		if err != nil {
			t.Fatalf("observers notified (-want +got):\n%s", cmp.Diff(want, got))
		}
	}

	web := deployment(ns, "web", map[string]string{"app": "web"})
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(map[string]int{"by-name": 1})

	web, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web.Annotations = map[string]string{"changed": "yes"}
	if _, err := kube.AppsV1().Deployments(ns).Update(t.Context(), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(map[string]int{"by-name": 2})

	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "api-1", map[string]string{"app": "api"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "db", map[string]string{"app": "db"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(map[string]int{"by-name": 2, "by-selector": 1})
}

func mustOnChanged(t *testing.T, trk tracker.Interface, obj any) {
	if err := trk.OnChanged(obj); err != nil {
		t.Errorf("OnChanged: %v", err)
	}
}

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pod": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			},
		},
	}
}
