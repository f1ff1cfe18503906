package injectiontest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
)

// Resource declares a kind to the fake RESTMapper and the fake dynamic
// client. Plurals are given, never guessed, as on a real server.
type Resource struct {
	// Kind is the object's group, version and kind.
	Kind schema.GroupVersionKind
	// Resource is the plural the kind is served under, e.g. "widgets".
	Resource string
	// Namespaced is false for cluster-scoped kinds.
	Namespaced bool
	// ListKind defaults to Kind.Kind + "List".
	ListKind string
}

// GVR returns the resource r declares.
func (r Resource) GVR() schema.GroupVersionResource {
	return r.Kind.GroupVersion().WithResource(r.Resource)
}

func (r Resource) listKind() string {
	if r.ListKind != "" {
		return r.ListKind
	}
	return r.Kind.Kind + "List"
}

// BuiltinResources returns the built-in kinds NewContext always knows:
// the workloads Bindings patch (Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job, CronJob, Pod) and what controllers and the webhook touch
// (Namespace, Secret, ConfigMap, Service, ServiceAccount, Lease, Event,
// Mutating- and ValidatingWebhookConfiguration).
func BuiltinResources() []Resource {
	core := func(kind, plural string, namespaced bool) Resource {
		return Resource{Kind: schema.GroupVersionKind{Version: "v1", Kind: kind}, Resource: plural, Namespaced: namespaced}
	}
	in := func(group, version, kind, plural string, namespaced bool) Resource {
		return Resource{Kind: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, Resource: plural, Namespaced: namespaced}
	}
	return []Resource{
		core("Pod", "pods", true),
		core("Namespace", "namespaces", false),
		core("Secret", "secrets", true),
		core("ConfigMap", "configmaps", true),
		core("Service", "services", true),
		core("ServiceAccount", "serviceaccounts", true),
		core("Event", "events", true),
		in("apps", "v1", "Deployment", "deployments", true),
		in("apps", "v1", "StatefulSet", "statefulsets", true),
		in("apps", "v1", "DaemonSet", "daemonsets", true),
		in("apps", "v1", "ReplicaSet", "replicasets", true),
		in("batch", "v1", "Job", "jobs", true),
		in("batch", "v1", "CronJob", "cronjobs", true),
		in("coordination.k8s.io", "v1", "Lease", "leases", true),
		in("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false),
		in("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false),
	}
}

// Options configure NewContextWithOptions. The zero value is what
// NewContext uses.
type Options struct {
	// Resources are kinds beyond BuiltinResources, typically the test's
	// custom resources.
	Resources []Resource
	// Logger goes into the context (controller/logging). The default
	// discards everything; a zaptest logger is unsafe here because the duck
	// informers may log after the test has returned.
	Logger *zap.Logger
	// InjectionOptions are passed to injection.NewWithClients.
	InjectionOptions injection.Options
}

// Fakes are the fake clients behind a context from NewContext, for a test
// to seed more objects, add reactors or inspect actions.
type Fakes struct {
	Kube       *kubefake.Clientset
	Dynamic    *dynamicfake.FakeDynamicClient
	RESTMapper *meta.DefaultRESTMapper
	Informers  *injection.InformerSet

	// resourceVersions numbers every object stored, seeded or written.
	resourceVersions atomic.Int64
}

// NewContext is NewContextWithOptions with zero Options.
func NewContext(t testing.TB, objects ...runtime.Object) (context.Context, *Fakes) {
	t.Helper()
	return NewContextWithOptions(t, Options{}, objects...)
}

// NewContextWithOptions returns an injection context over fakes seeded with
// objects, and the fakes. Each object's kind must be known (a built-in or
// one of opts.Resources): typed objects of client-go's scheme may leave
// TypeMeta empty, every other object must set it. Objects of kinds in
// client-go's scheme, typed or unstructured, go into both fake clients;
// others into the dynamic client only. As in a cluster, the namespace of
// every seeded object exists: a Namespace is seeded for each namespace the
// objects use unless objects hold it already, and every object has a
// resourceVersion: one seeded without gets one, and every create, update
// and patch through either fake stores a new one, so a write guarded by
// the resourceVersion it read (a JSON patch's "test") behaves as against
// an API server. (The fakes do not refuse an update whose resourceVersion
// is stale.) It fails t on an unknown kind.
//
// The context ends when the test ends, and a t.Cleanup shuts the informers
// down. Nothing is started: call Fakes.Start (or Informers.Start) after the
// constructor under test has requested its informers.
func NewContextWithOptions(t testing.TB, opts Options, objects ...runtime.Object) (context.Context, *Fakes) {
	t.Helper()
	resources := append(BuiltinResources(), opts.Resources...)

	mapper := meta.NewDefaultRESTMapper(nil)
	listKinds := map[schema.GroupVersionResource]string{}
	for _, r := range resources {
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		mapper.AddSpecific(r.Kind, r.GVR(), r.Kind.GroupVersion().WithResource(strings.ToLower(r.Kind.Kind)), scope)
		listKinds[r.GVR()] = r.listKind()
	}

	// The dynamic fake's scheme knows every kind as unstructured; the list
	// kinds are registered from listKinds, so no plural is guessed.
	dynScheme := runtime.NewScheme()
	for _, r := range resources {
		dynScheme.AddKnownTypeWithName(r.Kind, &unstructured.Unstructured{})
	}
	fakes := &Fakes{
		Kube:       kubefake.NewClientset(),
		Dynamic:    dynamicfake.NewSimpleDynamicClientWithCustomListKinds(dynScheme, listKinds),
		RESTMapper: mapper,
	}
	versionWrites(fakes.Kube, &fakes.resourceVersions)
	versionWrites(fakes.Dynamic, &fakes.resourceVersions)
	for _, obj := range withNamespaces(objects) {
		if err := fakes.seed(obj); err != nil {
			t.Fatalf("injectiontest: %v", err)
		}
	}

	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	ctx := logging.WithLogger(t.Context(), logger)
	ctx, set, err := injection.NewWithClients(ctx, injection.Clients{
		Kube:       fakes.Kube,
		Dynamic:    fakes.Dynamic,
		Metadata:   MetadataFromDynamic(fakes.Dynamic),
		RESTMapper: mapper,
	}, opts.InjectionOptions)
	if err != nil {
		t.Fatalf("injectiontest: %v", err)
	}
	fakes.Informers = set
	t.Cleanup(set.Shutdown)
	return ctx, fakes
}

// seed adds obj to the fake clients through their trackers, under the
// resource the fake RESTMapper gives for its kind.
func (f *Fakes) seed(obj runtime.Object) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		kinds, _, err := kubescheme.Scheme.ObjectKinds(obj)
		if err != nil || len(kinds) == 0 {
			return fmt.Errorf("seed %T: no apiVersion and kind, and not a client-go type: set its TypeMeta", obj)
		}
		gvk = kinds[0]
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	mapping, err := f.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("seed %s %s: declare it in Options.Resources: %w", apiVersion, kind, err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("seed %s %s: %w", apiVersion, kind, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	if u.GetResourceVersion() == "" {
		// As stored by an API server: a write guarded by the
		// resourceVersion it read must find one.
		u.SetResourceVersion(strconv.FormatInt(f.resourceVersions.Add(1), 10))
	}
	name := u.GetNamespace() + "/" + u.GetName()
	if err := f.Dynamic.Tracker().Create(mapping.Resource, u, u.GetNamespace()); err != nil {
		return fmt.Errorf("seed %s %s %s in the dynamic client: %w", apiVersion, kind, name, err)
	}
	if !kubescheme.Scheme.Recognizes(gvk) {
		return nil
	}
	typed, err := kubescheme.Scheme.New(gvk)
	if err != nil {
		return fmt.Errorf("seed %s %s %s: %w", apiVersion, kind, name, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, typed); err != nil {
		return fmt.Errorf("seed %s %s %s: to %T: %w", apiVersion, kind, name, typed, err)
	}
	if err := f.Kube.Tracker().Create(mapping.Resource, typed, u.GetNamespace()); err != nil {
		return fmt.Errorf("seed %s %s %s in the kube client: %w", apiVersion, kind, name, err)
	}
	return nil
}

// Start starts the informers requested so far and waits, at most ten
// seconds, for their caches; it fails t if they do not sync.
func (f *Fakes) Start(t testing.TB) {
	t.Helper()
	f.Informers.Start(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.Informers.WaitForCacheSync(ctx); err != nil {
		t.Fatalf("injectiontest: %v", err)
	}
}

// withNamespaces returns objects with a Namespace added for every namespace
// they use that they do not hold.
func withNamespaces(objects []runtime.Object) []runtime.Object {
	have := map[string]bool{}
	var used []string
	for _, obj := range objects {
		if ns, ok := obj.(*corev1.Namespace); ok {
			have[ns.Name] = true
			continue
		}
		if m, err := meta.Accessor(obj); err == nil && m.GetNamespace() != "" && !slices.Contains(used, m.GetNamespace()) {
			used = append(used, m.GetNamespace())
		}
	}
	out := slices.Clone(objects)
	for _, ns := range used {
		if !have[ns] {
			out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	}
	return out
}
