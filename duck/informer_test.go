package duck_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
)

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	cronJobsGVR    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
)

func fakeDynamic(t testing.TB, objs ...map[string]any) *dynamicfake.FakeDynamicClient {
	var runtimeObjs []runtime.Object
	for _, o := range objs {
		runtimeObjs = append(runtimeObjs, &unstructured.Unstructured{Object: o})
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		deploymentsGVR: "DeploymentList",
		cronJobsGVR:    "CronJobList",
	}, runtimeObjs...)
}

func TestTypedInformerFactoryConvertsByShape(t *testing.T) {
	malformed := cronJobDoc(t)
	malformed["metadata"].(map[string]any)["name"] = "broken"
	malformed["spec"].(map[string]any)["jobTemplate"] = "not an object"
	client := fakeDynamic(t, deploymentDoc(t), cronJobDoc(t), malformed)

	var mu sync.Mutex
	var conversionErrors []string
	factory := &duck.CachedInformerFactory{
		Delegate: &duck.TypedInformerFactory{Client: client, ConversionError: func(u *unstructured.Unstructured, err error) {
			mu.Lock()
			defer mu.Unlock()
			conversionErrors = append(conversionErrors, u.GetName())
		}},
		Stop: t.Context().Done(),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tests := []struct {
		gvr       schema.GroupVersionResource
		name      string
		wantImage string
	}{
		{deploymentsGVR, "web", "registry.example.com/shop/web:1.4.2"},
		{cronJobsGVR, "nightly", "registry.example.com/shop/web:1.4.2"},
	}
	for _, tt := range tests {
		_, lister, err := factory.Get(ctx, tt.gvr)
		if err != nil {
			t.Fatalf("Get(%s): %v", tt.gvr, err)
		}
		obj, err := lister.ByNamespace("shop").Get(tt.name)
		if err != nil {
			t.Fatalf("%s lister: %v", tt.gvr, err)
		}
		w, ok := obj.(*duck.WithPod)
		if !ok {
			t.Fatalf("%s lister gave a %T, want *duck.WithPod", tt.gvr, obj)
		}
		if got := w.Spec.Template.Spec.Containers[0].Image; got != tt.wantImage {
			t.Errorf("%s %s: image %q, want %q", tt.gvr, tt.name, got, tt.wantImage)
		}
	}
	_, lister, _ := factory.Get(ctx, cronJobsGVR)
	if _, err := lister.ByNamespace("shop").Get("broken"); err == nil {
		t.Error("an object that does not convert is in the cache")
	}
	mu.Lock()
	if diff := cmp.Diff([]string{"broken"}, conversionErrors); diff != "" {
		t.Errorf("ConversionError calls (-want +got):\n%s", diff)
	}
	mu.Unlock()
}

// fakeFactory hands out informers whose list blocks until release is
// closed, and fails while failures > 0.
type fakeFactory struct {
	calls    atomic.Int32
	failures atomic.Int32
	release  chan struct{}
}

func (f *fakeFactory) Get(_ context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
	f.calls.Add(1)
	if f.failures.Add(-1) >= 0 {
		return nil, nil, errors.New("delegate failed")
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			select {
			case <-f.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &duck.WithPodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}), &duck.WithPod{}, 0, cache.Indexers{})
	return inf, cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()), nil
}

// noWatchList tells the reflector to list, not to stream the list.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func TestCachedInformerFactory(t *testing.T) {
	delegate := &fakeFactory{release: make(chan struct{})}
	delegate.failures.Store(1)
	factory := &duck.CachedInformerFactory{Delegate: delegate, Stop: t.Context().Done()}

	// A delegate error is returned, not kept.
	if _, _, err := factory.Get(t.Context(), deploymentsGVR); err == nil {
		t.Fatal("Get succeeded while the delegate fails")
	}

	// The cache has not synced: Get gives up when its ctx ends.
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, _, err := factory.Get(short, deploymentsGVR)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get before sync = %v, want an error wrapping context.DeadlineExceeded", err)
	}

	// Concurrent callers share one informer once it syncs.
	close(delegate.release)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	informers := make([]cache.SharedIndexInformer, 8)
	errs := make([]error, len(informers))
	for i := range informers {
		wg.Go(func() { informers[i], _, errs[i] = factory.Get(ctx, deploymentsGVR) })
	}
	wg.Wait()
	for i := range informers {
		if errs[i] != nil {
			t.Fatalf("Get %d: %v", i, errs[i])
		}
		if informers[i] != informers[0] {
			t.Errorf("Get %d returned a different informer", i)
		}
	}
	if got := delegate.calls.Load(); got != 2 {
		t.Errorf("delegate called %d times, want 2 (one failure, one informer)", got)
	}
}

func TestCachedInformerFactoryStopped(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	factory := &duck.CachedInformerFactory{Delegate: &fakeFactory{release: make(chan struct{})}, Stop: stop}
	if _, _, err := factory.Get(t.Context(), deploymentsGVR); !errors.Is(err, duck.ErrFactoryStopped) {
		t.Errorf("Get after Stop = %v, want ErrFactoryStopped", err)
	}
}

func TestEnqueueInformerFactory(t *testing.T) {
	client := fakeDynamic(t, deploymentDoc(t))
	added := make(chan string, 10)
	factory := &duck.CachedInformerFactory{
		Delegate: &duck.EnqueueInformerFactory{
			Delegate: &duck.TypedInformerFactory{Client: client},
			EventHandler: cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
				added <- obj.(*duck.WithPod).Name
			}},
		},
		Stop: t.Context().Done(),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for range 3 {
		if _, _, err := factory.Get(ctx, deploymentsGVR); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case name := <-added:
		if name != "web" {
			t.Errorf("handler saw %q, want web", name)
		}
	case <-ctx.Done():
		t.Fatal("handler never called")
	}
	select {
	case name := <-added:
		t.Errorf("handler called again for %q: added more than once", name)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestTypedInformerFactoryDropsManagedFields: the cache keeps what a Binding
// can use; managedFields, a quarter of a workload's size, stay out.
func TestTypedInformerFactoryDropsManagedFields(t *testing.T) {
	doc := deploymentDoc(t)
	doc["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{
		"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:spec": map[string]any{}},
	}}
	factory := &duck.CachedInformerFactory{Delegate: &duck.TypedInformerFactory{Client: fakeDynamic(t, doc)}, Stop: t.Context().Done()}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, lister, err := factory.Get(ctx, deploymentsGVR)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := lister.ByNamespace("shop").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	w := obj.(*duck.WithPod)
	if len(w.ManagedFields) != 0 {
		t.Errorf("cached WithPod keeps %d managedFields entries", len(w.ManagedFields))
	}
	if w.Name != "web" || len(w.Spec.Template.Spec.Containers) == 0 {
		t.Errorf("the rest of the object was lost: %+v", w.ObjectMeta)
	}
}
