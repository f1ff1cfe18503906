package duck_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection/injectiontest"
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

// fakeMetadata is a metadata client and a RESTMapper over a fake dynamic
// client holding objs.
func fakeMetadata(t testing.TB, objs ...map[string]any) (metadata.Interface, meta.RESTMapper) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, meta.RESTScopeNamespace)
	return injectiontest.MetadataFromDynamic(fakeDynamic(t, objs...)), mapper
}

// TestMetadataInformerFactoryKeepsOnlyWhatBindingsNeed: the cache holds a
// slim copy of each object, its kind set; managedFields, other
// annotations, spec and status stay out. The BoundIndex finds subjects by
// the Binding that bound them.
func TestMetadataInformerFactoryKeepsOnlyWhatBindingsNeed(t *testing.T) {
	doc := deploymentDoc(t)
	md := doc["metadata"].(map[string]any)
	md["managedFields"] = []any{map[string]any{
		"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:spec": map[string]any{}},
	}}
	md["annotations"] = map[string]any{
		"kubectl.kubernetes.io/last-applied-configuration": "{\"the\":\"whole object\"}",
		duck.BoundAnnotation: "githubbindings.bindings.bindkit.dev/gh:2,configbindings.bindings.bindkit.dev/cb:1",
	}
	md["finalizers"] = []any{"example.com/keep"}
	client, mapper := fakeMetadata(t, doc, cronJobDoc(t))
	factory := &duck.CachedInformerFactory{Delegate: &duck.MetadataInformerFactory{Client: client, Mapper: mapper}, Stop: t.Context().Done()}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	inf, lister, err := factory.Get(ctx, deploymentsGVR)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := lister.ByNamespace("shop").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "web", Labels: map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "tier": "frontend"},
			Annotations: map[string]string{duck.BoundAnnotation: "githubbindings.bindings.bindkit.dev/gh:2,configbindings.bindings.bindkit.dev/cb:1"},
		},
	}
	if diff := cmp.Diff(want, obj, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion", "UID", "Generation")); diff != "" {
		t.Errorf("cached object (-want +got):\n%s", diff)
	}
	by := duck.BoundBy{Resource: schema.GroupResource{Group: "bindings.bindkit.dev", Resource: "githubbindings"}, Name: "gh"}
	bound, err := inf.GetIndexer().ByIndex(duck.BoundIndex, duck.BoundIndexKey("shop", by))
	if err != nil || len(bound) != 1 {
		t.Errorf("BoundIndex found %d objects (%v), want web", len(bound), err)
	}
	if _, lister, err := factory.Get(ctx, cronJobsGVR); err != nil {
		t.Fatal(err)
	} else if obj, err := lister.ByNamespace("shop").Get("nightly"); err != nil || obj.(*metav1.PartialObjectMetadata).Kind != "CronJob" {
		t.Errorf("cronjob: %v, %v", obj, err)
	}
}

func TestMetadataInformerFactoryNeedsClientAndMapper(t *testing.T) {
	for _, f := range []*duck.MetadataInformerFactory{{}, {Mapper: meta.NewDefaultRESTMapper(nil)}} {
		if _, _, err := f.Get(t.Context(), deploymentsGVR); err == nil {
			t.Errorf("Get with %+v succeeded", f)
		}
	}
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
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}), &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
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
	client, mapper := fakeMetadata(t, deploymentDoc(t))
	added := make(chan string, 10)
	// One shared cache, as a process has, and a Binding kind's handler on
	// it: added once, however often the kind asks.
	shared := &duck.CachedInformerFactory{Delegate: &duck.MetadataInformerFactory{Client: client, Mapper: mapper}, Stop: t.Context().Done()}
	factory := &duck.EnqueueInformerFactory{
		Delegate: shared,
		EventHandler: cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			added <- obj.(*metav1.PartialObjectMetadata).Name
		}},
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
	if _, _, err := (&duck.EnqueueInformerFactory{Delegate: shared}).Get(ctx, deploymentsGVR); err == nil {
		t.Error("EnqueueInformerFactory without a handler succeeded")
	}
}
