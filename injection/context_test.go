package injection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/injection"
)

// panicMessage runs f and returns what it panicked with, or "" if it did not.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestAccessors(t *testing.T) {
	cfg := &rest.Config{Host: "https://example.invalid"}
	kube := kubefake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	mapper := meta.NewDefaultRESTMapper(nil)
	factory := &duck.MetadataInformerFactory{Client: metadatafake.NewSimpleMetadataClient(runtime.NewScheme()), Mapper: mapper}

	tests := []struct {
		name string
		// set puts the value in a context; get reads it back (and may panic);
		// try is the TryX variant.
		set       func(context.Context) context.Context
		get       func(context.Context) any
		try       func(context.Context) (any, bool)
		want      any
		wantPanic string
	}{{
		name: "Config",
		set:  func(ctx context.Context) context.Context { return injection.WithConfig(ctx, cfg) },
		get:  func(ctx context.Context) any { return injection.Config(ctx) },
		try:  func(ctx context.Context) (any, bool) { return injection.TryConfig(ctx) },
		want: cfg, wantPanic: "injection: no rest config in context; build the context with injection.New or injection.WithConfig",
	}, {
		name: "KubeClient",
		set:  func(ctx context.Context) context.Context { return injection.WithKubeClient(ctx, kube) },
		get:  func(ctx context.Context) any { return injection.KubeClient(ctx) },
		try:  func(ctx context.Context) (any, bool) { return injection.TryKubeClient(ctx) },
		want: kube, wantPanic: "injection: no kube client in context; build the context with injection.New or injection.WithKubeClient",
	}, {
		name: "DynamicClient",
		set:  func(ctx context.Context) context.Context { return injection.WithDynamicClient(ctx, dyn) },
		get:  func(ctx context.Context) any { return injection.DynamicClient(ctx) },
		try:  func(ctx context.Context) (any, bool) { return injection.TryDynamicClient(ctx) },
		want: dyn, wantPanic: "injection: no dynamic client in context; build the context with injection.New or injection.WithDynamicClient",
	}, {
		name: "RESTMapper",
		set:  func(ctx context.Context) context.Context { return injection.WithRESTMapper(ctx, mapper) },
		get:  func(ctx context.Context) any { return injection.RESTMapper(ctx) },
		try:  func(ctx context.Context) (any, bool) { return injection.TryRESTMapper(ctx) },
		want: mapper, wantPanic: "injection: no REST mapper in context; build the context with injection.New or injection.WithRESTMapper",
	}, {
		name: "DuckInformerFactory",
		set:  func(ctx context.Context) context.Context { return injection.WithDuckInformerFactory(ctx, factory) },
		get:  func(ctx context.Context) any { return injection.DuckInformerFactory(ctx) },
		try:  func(ctx context.Context) (any, bool) { return injection.TryDuckInformerFactory(ctx) },
		want: factory, wantPanic: "injection: no duck informer factory in context; build the context with injection.New or injection.WithDuckInformerFactory",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.set(t.Context())
			var got any
			if msg := panicMessage(func() { got = tt.get(ctx) }); msg != "" {
				t.Fatalf("get after set panicked: %s", msg)
			}
			if got != tt.want {
				t.Errorf("get after set = %p, want %p", got, tt.want)
			}
			if got, ok := tt.try(ctx); !ok || got != tt.want {
				t.Errorf("try after set = %p, %v; want %p, true", got, ok, tt.want)
			}

			if diff := cmp.Diff(tt.wantPanic, panicMessage(func() { tt.get(t.Context()) })); diff != "" {
				t.Errorf("get on empty context: panic message (-want +got):\n%s", diff)
			}
			if _, ok := tt.try(t.Context()); ok {
				t.Errorf("try on empty context reported a value")
			}
		})
	}
}

// A nil value is no value: the getter panics as if nothing were set, rather
// than hand a nil client to a constructor that would fail later and further
// from the cause.
func TestAccessorsTreatNilAsMissing(t *testing.T) {
	ctx := injection.WithConfig(t.Context(), nil)
	ctx = injection.WithKubeClient(ctx, nil)
	for name, get := range map[string]func(){
		"Config":     func() { injection.Config(ctx) },
		"KubeClient": func() { injection.KubeClient(ctx) },
	} {
		if panicMessage(get) == "" {
			t.Errorf("%s with a nil value did not panic", name)
		}
	}
}

func TestInformerAccessorsPanicWithoutInformerSet(t *testing.T) {
	tests := []struct {
		name string
		get  func(context.Context)
		want string
	}{{
		name: "Informers",
		get:  func(ctx context.Context) { injection.Informers(ctx) },
		want: "injection: no informer set in context; build the context with injection.New or injection.WithInformers",
	}, {
		name: "KubeInformerFactory",
		get:  func(ctx context.Context) { injection.KubeInformerFactory(ctx) },
		want: "injection: no informer set (for the kube informer factory) in context; build the context with injection.New or injection.WithInformers",
	}, {
		name: "TypedInformerFor",
		get:  func(ctx context.Context) { injection.TypedInformerFor[Widget](ctx, widgetsGVR) },
		want: "injection: no informer set in context; build the context with injection.New or injection.WithInformers",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, panicMessage(func() { tt.get(t.Context()) })); diff != "" {
				t.Errorf("panic message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewWithClientsFillsContext(t *testing.T) {
	kube := kubefake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	ctx, set, err := injection.NewWithClients(t.Context(), injection.Clients{Kube: kube, Dynamic: dyn, Metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme())}, injection.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Shutdown)

	if injection.KubeClient(ctx) != kube || injection.DynamicClient(ctx) != dyn {
		t.Errorf("clients in context are not the ones passed in")
	}
	if injection.Informers(ctx) != set {
		t.Errorf("Informers(ctx) is not the returned set")
	}
	if injection.KubeInformerFactory(ctx) != set.KubeInformerFactory() {
		t.Errorf("KubeInformerFactory(ctx) is not the set's factory")
	}
	if injection.DuckInformerFactory(ctx) != set.DuckInformerFactory() {
		t.Errorf("DuckInformerFactory(ctx) is not the set's factory")
	}
	if _, ok := injection.RESTMapper(ctx).(*duck.RESTMapper); !ok {
		t.Errorf("RESTMapper(ctx) = %T, want the discovery-backed *duck.RESTMapper", injection.RESTMapper(ctx))
	}
	if _, ok := injection.TryConfig(ctx); ok {
		t.Errorf("TryConfig reported a config although Clients.Config was nil")
	}

	_, _, err = injection.NewWithClients(t.Context(), injection.Clients{Kube: kube}, injection.Options{})
	if err == nil || !strings.Contains(err.Error(), "Dynamic, Metadata") {
		t.Errorf("NewWithClients without dynamic and metadata clients: error %v, want one naming both", err)
	}

	_, _, err = injection.NewWithClients(t.Context(), injection.Clients{Kube: kube, Dynamic: dyn, Metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme())}, injection.Options{ResyncPeriod: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "ResyncPeriod") {
		t.Errorf("NewWithClients with a negative ResyncPeriod: error %v, want one naming ResyncPeriod", err)
	}
}

func TestNew(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ctx, set, err := injection.New(t.Context(), cfg, injection.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Shutdown)
	if injection.Config(ctx) != cfg {
		t.Errorf("Config(ctx) is not the config passed to New")
	}
	for name, ok := range map[string]bool{
		"kube client":    func() bool { _, ok := injection.TryKubeClient(ctx); return ok }(),
		"dynamic client": func() bool { _, ok := injection.TryDynamicClient(ctx); return ok }(),
		"REST mapper":    func() bool { _, ok := injection.TryRESTMapper(ctx); return ok }(),
		"duck factory":   func() bool { _, ok := injection.TryDuckInformerFactory(ctx); return ok }(),
		"informer set":   func() bool { _, ok := injection.TryInformers(ctx); return ok }(),
	} {
		if !ok {
			t.Errorf("New did not put a %s in the context", name)
		}
	}

	if _, _, err := injection.New(t.Context(), nil, injection.Options{}); err == nil {
		t.Errorf("New(nil config) did not fail")
	}
	bad := &rest.Config{Host: "https://127.0.0.1:1", Username: "u", BearerToken: "t"}
	if _, _, err := injection.New(t.Context(), bad, injection.Options{}); err == nil {
		t.Errorf("New with basic auth and a bearer token did not fail")
	}
}
