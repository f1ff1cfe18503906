package bindingtest

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/wiring"
)

// DefaultSystemNamespace is the namespace NewController and Run tell the
// controller it runs in when their options name none.
const DefaultSystemNamespace = "bindkit-system"

// ControllerOptions configure NewController. The zero value is ready.
type ControllerOptions struct {
	// Resources declares kinds to the fakes beyond the built-in ones and the
	// Binding kind, e.g. a custom workload the Bindings name.
	Resources []injectiontest.Resource
	// SystemNamespace is the namespace the controller runs in. Default:
	// DefaultSystemNamespace.
	SystemNamespace string
}

// Controller is a Binding kind's controller (wiring.Kind.Controller)
// built over the injection fakes, started and promoted, for table-driven
// reconciler tests without an API server: seed objects, Reconcile a
// Binding, read back what it wrote with Get.
type Controller struct {
	// Fakes are the clients the controller uses. The reconciler reads and
	// writes subjects and Bindings through Fakes.Dynamic (Get reads
	// there); events go through Fakes.Kube.
	*injectiontest.Fakes
	// Context is the context the constructor was given, and Reconcile runs
	// in.
	Context context.Context
	// Impl is what the constructor returned.
	Impl *controller.Impl
	// Reconciler is the Impl's psbinding.BaseReconciler.
	Reconciler *psbinding.BaseReconciler

	gvk schema.GroupVersionKind
}

// NewController builds binding's controller over fakes seeded with objects,
// as sharedmain builds it over real clients, starts the informers, waits
// for their caches and promotes the reconciler, as a leader's would be. The
// Binding kind is declared to the fakes (wiring.Kind.GVR and GVK), and
// so is every object's namespace; an object that is not of a client-go type
// and has no TypeMeta is taken for a Binding of the kind. The fakes give
// every object a resourceVersion and a new one on each write, as an API
// server does (see injectiontest).
func NewController(t testing.TB, binding *wiring.Kind, opts ControllerOptions, objects ...runtime.Object) *Controller {
	t.Helper()
	bindings := injectiontest.Resource{Kind: binding.GVK, Resource: binding.GVR.Resource, Namespaced: true}
	for _, obj := range objects {
		if obj.GetObjectKind().GroupVersionKind().Empty() {
			if _, _, err := kubescheme.Scheme.ObjectKinds(obj); err != nil {
				obj.GetObjectKind().SetGroupVersionKind(binding.GVK)
			}
		}
	}
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{
		Resources: append([]injectiontest.Resource{bindings}, opts.Resources...),
	}, objects...)
	ns := opts.SystemNamespace
	if ns == "" {
		ns = DefaultSystemNamespace
	}
	ctx = injection.WithSystemNamespace(ctx, ns)
	impl := binding.Controller(ctx, nil) // a Binding's controller reads no ConfigMap
	r, ok := impl.Reconciler().(*psbinding.BaseReconciler)
	if !ok {
		t.Fatalf("bindingtest: the controller reconciles with %T, not a *psbinding.BaseReconciler", impl.Reconciler())
	}
	fakes.Start(t)
	r.Promote(func(string) {}) // as a leader; the keys it would enqueue are reconciled by the test
	return &Controller{Fakes: fakes, Context: ctx, Impl: impl, Reconciler: r, gvk: binding.GVK}
}

// Reconcile reconciles the Binding namespace/name once, and returns its
// error.
func (c *Controller) Reconcile(namespace, name string) error {
	return c.Reconciler.Reconcile(c.Context, namespace+"/"+name)
}

// Get reads object namespace/name of T's kind from the dynamic fake, where
// the reconciler writes, and converts it to a *T. T is a client-go type
// (appsv1.Deployment, say) or the Binding kind's type. It fails t when the
// object is missing or does not convert.
func Get[T any, PT interface {
	*T
	runtime.Object
}](t testing.TB, c *Controller, namespace, name string) *T {
	t.Helper()
	out := PT(new(T))
	gvk := c.gvk
	if kinds, _, err := kubescheme.Scheme.ObjectKinds(out); err == nil && len(kinds) > 0 {
		gvk = kinds[0]
	}
	u, err := c.getUnstructured(gvk, namespace, name)
	if err != nil {
		t.Fatalf("bindingtest: %v", err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("bindingtest: %s %s/%s: convert to %T: %v", gvk.Kind, namespace, name, out, err)
	}
	return out
}

func (c *Controller) getUnstructured(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	mapping, err := c.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	u, err := c.Dynamic.Resource(mapping.Resource).Namespace(namespace).Get(c.Context, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	return u, nil
}
