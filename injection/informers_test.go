package injection_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// listWatched returns the resources the fake saw list or watch calls for,
// sorted and without repeats.
func listWatched(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A constructor that asks for nothing gets nothing started: the kube
// factory has many informers on offer, and only the requested ones may
// reach the server.
func TestInformersStartOnlyWhenRequested(t *testing.T) {
	tests := []struct {
		name        string
		request     func(ctx context.Context)
		wantStarted []string
		wantKube    []string // list/watch calls the fake kube client saw
		wantDynamic []string
	}{{
		name:    "nothing requested",
		request: func(context.Context) {},
	}, {
		name: "secrets",
		request: func(ctx context.Context) {
			injection.KubeInformerFactory(ctx).Core().V1().Secrets().Informer()
		},
		wantStarted: []string{"*v1.Secret"},
		wantKube:    []string{"list secrets", "watch secrets"},
	}, {
		name: "secrets lister and widgets",
		request: func(ctx context.Context) {
			injection.KubeInformerFactory(ctx).Core().V1().Secrets().Lister()
			injection.TypedInformerFor[Widget](ctx, widgetsGVR)
		},
		wantStarted: []string{"*v1.Secret", widgetsGVR.String()},
		wantKube:    []string{"list secrets", "watch secrets"},
		wantDynamic: []string{"list widgets", "watch widgets"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{
				Resources: []injectiontest.Resource{widgetResource},
			})
			tt.request(ctx)
			fakes.Start(t)

			if diff := cmp.Diff(tt.wantStarted, fakes.Informers.Started()); diff != "" {
				t.Errorf("Started() (-want +got):\n%s", diff)
			}
			// The watch is established shortly after the cache syncs.
			eventually(t, "kube list/watch calls", func() string {
				return cmp.Diff(tt.wantKube, listWatched(fakes.Kube.Actions()))
			})
			eventually(t, "dynamic list/watch calls", func() string {
				return cmp.Diff(tt.wantDynamic, listWatched(fakes.Dynamic.Actions()))
			})
		})
	}
}

// Informers requested after Start wait for the next Start; the ones
// already running are not started twice.
func TestInformersStartAgainStartsLateRequests(t *testing.T) {
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{widgetResource}},
		widget("shop", "a", int64(1)))
	injection.KubeInformerFactory(ctx).Core().V1().Secrets().Informer()
	fakes.Start(t)

	late := injection.TypedInformerFor[Widget](ctx, widgetsGVR)
	if diff := cmp.Diff([]string{"*v1.Secret"}, fakes.Informers.Started()); diff != "" {
		t.Fatalf("Started() before the second Start (-want +got):\n%s", diff)
	}
	if late.Informer().HasSynced() {
		t.Fatalf("informer requested after Start synced before the next Start")
	}
	fakes.Start(t)
	if !late.Informer().HasSynced() {
		t.Errorf("informer requested after Start had not synced after the second Start and WaitForCacheSync")
	}
	if diff := cmp.Diff([]string{"*v1.Secret", widgetsGVR.String()}, fakes.Informers.Started()); diff != "" {
		t.Errorf("Started() (-want +got):\n%s", diff)
	}
}

// WaitForCacheSync returns when its context ends even if an informer can
// never sync, and says which one.
func TestWaitForCacheSyncIsBoundedByContext(t *testing.T) {
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{widgetResource}})
	listFails := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("server unavailable")
	}
	fakes.Kube.PrependReactor("list", "configmaps", listFails)
	fakes.Dynamic.PrependReactor("list", "widgets", listFails)
	injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps().Informer()
	secrets := injection.KubeInformerFactory(ctx).Core().V1().Secrets().Informer()
	injection.TypedInformerFor[Widget](ctx, widgetsGVR)
	fakes.Informers.Start(t.Context())
	// The Secrets informer syncs: wait for it first, so that the message
	// names the two that never can however slow the machine.
	if !cache.WaitForCacheSync(t.Context().Done(), secrets.HasSynced) {
		t.Fatal("the Secrets informer did not sync")
	}

	waitCtx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := fakes.Informers.WaitForCacheSync(waitCtx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForCacheSync error = %v, want one wrapping context.DeadlineExceeded", err)
	}
	want := "injection: wait for cache sync: not synced: *v1.ConfigMap, example.bindkit.dev/v1alpha1, Resource=widgets: context deadline exceeded"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestShutdownStopsInformers(t *testing.T) {
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{widgetResource}})
	secrets := injection.KubeInformerFactory(ctx).Core().V1().Secrets().Informer()
	widgets := injection.TypedInformerFor[Widget](ctx, widgetsGVR).Informer()
	// Started with a context that never ends: Shutdown alone must stop them.
	fakes.Informers.Start(context.Background())
	fakes.Informers.Shutdown()
	for name, inf := range map[string]interface{ IsStopped() bool }{"secrets": secrets, "widgets": widgets} {
		if !inf.IsStopped() {
			t.Errorf("%s informer still running after Shutdown", name)
		}
	}
	fakes.Informers.Shutdown() // a second call must not block or panic

	late := injection.TypedInformerFor[Widget](ctx, schema.GroupVersionResource{Group: "example.bindkit.dev", Version: "v1alpha1", Resource: "gadgets"})
	fakes.Informers.Start(t.Context())
	if late.Informer().HasSynced() || slices.Contains(fakes.Informers.Started(), late.GVR().String()) {
		t.Errorf("Start after Shutdown started an informer")
	}
}

// The duck factory in the context is the subject cache: slim metadata
// with the kind set, one informer per resource.
func TestDuckInformerFactoryFromContext(t *testing.T) {
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}", duck.BoundAnnotation: "githubbindings.bindings.bindkit.dev/gh:1"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx"}},
		}}},
	}
	ctx, _ := injectiontest.NewContext(t, deployment)
	factory := injection.DuckInformerFactory(ctx)
	getCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	inf, lister, err := factory.Get(getCtx, deploymentsGVR)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := factory.Get(getCtx, deploymentsGVR)
	if err != nil {
		t.Fatal(err)
	}
	if again != inf {
		t.Errorf("second Get returned another informer")
	}
	objs, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []*metav1.PartialObjectMetadata
	for _, o := range objs {
		got = append(got, o.(*metav1.PartialObjectMetadata))
	}
	want := []*metav1.PartialObjectMetadata{{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{duck.BoundAnnotation: "githubbindings.bindings.bindkit.dev/gh:1"}},
	}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion")); diff != "" {
		t.Errorf("subject cache (-want +got):\n%s", diff)
	}
}
