package injection_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
)

func fakeWidgetClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgetsGVR: "WidgetList"}, objs...)
}

// recorder collects the names of objects that failed to convert.
type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) record(u *unstructured.Unstructured, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, u.GetNamespace()+"/"+u.GetName())
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// eventually polls cond until it returns "" or five seconds pass, then
// fails t with the last difference.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	var diff string
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		diff = cond()
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

func TestTypedInformerListsAndWatches(t *testing.T) {
	client := fakeWidgetClient(
		widget("shop", "a", int64(1)),
		widget("shop", "b", int64(2)),
		widget("other", "c", int64(3)),
		widget("shop", "broken", "big"), // does not convert: skipped
	)
	var conversions recorder
	inf := injection.NewTypedInformer[Widget](client, widgetsGVR, injection.TypedInformerOptions{ConversionError: conversions.record})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { inf.Informer().RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer never synced")
	}

	widgets := client.Resource(widgetsGVR)
	tests := []struct {
		name string
		do   func(context.Context) error
		want map[string]int64
		// wantConversionErrors accumulates over the steps.
		wantConversionErrors []string
	}{{
		name:                 "initial list leaves out what does not convert",
		do:                   func(context.Context) error { return nil },
		want:                 map[string]int64{"shop/a": 1, "shop/b": 2, "other/c": 3},
		wantConversionErrors: []string{"shop/broken"},
	}, {
		name: "watch add",
		do: func(ctx context.Context) error {
			_, err := widgets.Namespace("shop").Create(ctx, widget("shop", "d", int64(4)), metav1.CreateOptions{})
			return err
		},
		want:                 map[string]int64{"shop/a": 1, "shop/b": 2, "other/c": 3, "shop/d": 4},
		wantConversionErrors: []string{"shop/broken"},
	}, {
		name: "watch update",
		do: func(ctx context.Context) error {
			_, err := widgets.Namespace("shop").Update(ctx, widget("shop", "a", int64(10)), metav1.UpdateOptions{})
			return err
		},
		want:                 map[string]int64{"shop/a": 10, "shop/b": 2, "other/c": 3, "shop/d": 4},
		wantConversionErrors: []string{"shop/broken"},
	}, {
		name: "update to something that does not convert drops the stale copy",
		do: func(ctx context.Context) error {
			_, err := widgets.Namespace("shop").Update(ctx, widget("shop", "b", "huge"), metav1.UpdateOptions{})
			return err
		},
		want:                 map[string]int64{"shop/a": 10, "other/c": 3, "shop/d": 4},
		wantConversionErrors: []string{"shop/broken", "shop/b"},
	}, {
		name: "watch delete",
		do: func(ctx context.Context) error {
			return widgets.Namespace("other").Delete(ctx, "c", metav1.DeleteOptions{})
		},
		want:                 map[string]int64{"shop/a": 10, "shop/d": 4},
		wantConversionErrors: []string{"shop/broken", "shop/b"},
	}}
	for _, tt := range tests {
		if err := tt.do(t.Context()); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		eventually(t, tt.name+": lister", func() string {
			got, err := inf.Lister().List(labels.Everything())
			if err != nil {
				return err.Error()
			}
			return cmp.Diff(tt.want, sizes(got))
		})
		eventually(t, tt.name+": conversion errors", func() string {
			return cmp.Diff(tt.wantConversionErrors, conversions.get())
		})
	}
}

func TestTypedListerGetAndListNamespace(t *testing.T) {
	labelled := widget("shop", "a", int64(1))
	labelled.SetLabels(map[string]string{"tier": "gold"})
	client := fakeWidgetClient(labelled, widget("shop", "b", int64(2)), widget("other", "c", int64(3)))
	inf := injection.NewTypedInformer[Widget](client, widgetsGVR, injection.TypedInformerOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { inf.Informer().RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer never synced")
	}
	lister := inf.Lister()

	got, err := lister.Get("shop", "a")
	if err != nil {
		t.Fatalf("Get(shop, a): %v", err)
	}
	if got.Spec.Size != 1 || got.APIVersion != "example.bindkit.dev/v1alpha1" || got.Kind != "Widget" {
		t.Errorf("Get(shop, a) = size %d, %s %s; want size 1, example.bindkit.dev/v1alpha1 Widget", got.Spec.Size, got.APIVersion, got.Kind)
	}
	if _, err := lister.Get("shop", "c"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(shop, c) error = %v, want NotFound", err)
	}

	tests := []struct {
		namespace string
		selector  labels.Selector
		want      map[string]int64
	}{
		{"shop", labels.Everything(), map[string]int64{"shop/a": 1, "shop/b": 2}},
		{"other", labels.Everything(), map[string]int64{"other/c": 3}},
		{"shop", labels.SelectorFromSet(labels.Set{"tier": "gold"}), map[string]int64{"shop/a": 1}},
		{"empty", labels.Everything(), map[string]int64{}},
	}
	for _, tt := range tests {
		got, err := lister.ListNamespace(tt.namespace, tt.selector)
		if err != nil {
			t.Fatalf("ListNamespace(%s, %s): %v", tt.namespace, tt.selector, err)
		}
		if diff := cmp.Diff(tt.want, sizes(got)); diff != "" {
			t.Errorf("ListNamespace(%s, %s) (-want +got):\n%s", tt.namespace, tt.selector, diff)
		}
	}
}

// TypedInformerFor shares one informer per resource and type, starts it
// with the set, and logs the objects it skips.
func TestTypedInformerForFromContext(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{
		Resources: []injectiontest.Resource{widgetResource},
		Logger:    zap.New(core),
	}, widget("shop", "a", int64(1)), widget("shop", "broken", "big"))

	first := injection.TypedInformerFor[Widget](ctx, widgetsGVR)
	if second := injection.TypedInformerFor[Widget](ctx, widgetsGVR); second != first {
		t.Errorf("second TypedInformerFor returned another informer")
	}
	if first.GVR() != widgetsGVR {
		t.Errorf("GVR() = %s, want %s", first.GVR(), widgetsGVR)
	}
	fakes.Start(t)

	got, err := first.Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"shop/a": 1}, sizes(got)); diff != "" {
		t.Errorf("after sync (-want +got):\n%s", diff)
	}
	var skipped []string
	for _, e := range logs.All() {
		skipped = append(skipped, e.ContextMap()["namespace"].(string)+"/"+e.ContextMap()["name"].(string))
	}
	if diff := cmp.Diff([]string{"shop/broken"}, skipped); diff != "" {
		t.Errorf("logged conversion errors (-want +got):\n%s", diff)
	}
}
