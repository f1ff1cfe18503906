package bindingtest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/wiring"
)

// Bindings creates, edits and deletes Bindings of one kind (T, with PT
// its pointer type) on a control plane, each in one line of a test. Every
// method fails the test, at the caller's line, when the kube-apiserver
// refuses; its message quotes the server's, which names the field of an
// invalid spec.
type Bindings[T any, PT interface {
	*T
	psbinding.Bindable
}] struct {
	t       testing.TB
	binding *wiring.Kind
	client  dynamic.NamespaceableResourceInterface
}

// NewBindings returns Bindings for the kind binding wires (as wiring.New
// returned it) on env.
func NewBindings[T any, PT interface {
	*T
	psbinding.Bindable
}](t testing.TB, env *envtest.Environment, binding *wiring.Kind) *Bindings[T, PT] {
	t.Helper()
	client, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatalf("bindingtest: client of the control plane: %v", err)
	}
	return &Bindings[T, PT]{t: t, binding: binding, client: client.Resource(binding.GVR)}
}

// Create creates b, its apiVersion and kind filled in, and returns it as
// the server stored it.
func (c *Bindings[T, PT]) Create(b PT) PT {
	c.t.Helper()
	u := c.encode(b)
	out, err := c.client.Namespace(b.GetNamespace()).Create(c.t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create %s %s/%s: %v", c.binding.GVK.Kind, b.GetNamespace(), b.GetName(), err)
	}
	return c.decode(out)
}

// CheckValid asks the kube-apiserver whether b is a valid Binding, with a
// dry-run create, and fails the test with the server's answer, which
// names the field to fill, when it is not.
func (c *Bindings[T, PT]) CheckValid(b PT) {
	c.t.Helper()
	u := c.encode(b)
	if _, err := c.client.Namespace(b.GetNamespace()).Create(c.t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		c.t.Fatalf("%s %s/%s is not a valid Binding; fill in the field the API server names where the test makes it (a scaffolded module: Example in the type file): %v", c.binding.GVK.Kind, b.GetNamespace(), b.GetName(), err)
	}
}

// Get returns the Binding namespace/name.
func (c *Bindings[T, PT]) Get(namespace, name string) PT {
	c.t.Helper()
	out, err := c.client.Namespace(namespace).Get(c.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("get %s %s/%s: %v", c.binding.GVK.Kind, namespace, name, err)
	}
	return c.decode(out)
}

// Edit reads the Binding namespace/name, changes it with edit and
// updates it, reading and changing it again on a conflict, and returns it
// as the server stored it.
func (c *Bindings[T, PT]) Edit(namespace, name string, edit func(PT)) PT {
	c.t.Helper()
	for range 10 {
		b := c.Get(namespace, name)
		edit(b)
		out, err := c.client.Namespace(namespace).Update(c.t.Context(), c.encode(b), metav1.UpdateOptions{})
		if err == nil {
			return c.decode(out)
		}
		if !isConflict(err) {
			c.t.Fatalf("update %s %s/%s: %v", c.binding.GVK.Kind, namespace, name, err)
		}
	}
	c.t.Fatalf("update %s %s/%s: a conflict ten times over", c.binding.GVK.Kind, namespace, name)
	return nil
}

// Delete deletes the Binding namespace/name. Its finalizer goes once the
// controller has unbound its subjects.
func (c *Bindings[T, PT]) Delete(namespace, name string) {
	c.t.Helper()
	if err := c.client.Namespace(namespace).Delete(c.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatalf("delete %s %s/%s: %v", c.binding.GVK.Kind, namespace, name, err)
	}
}

func (c *Bindings[T, PT]) encode(b PT) *unstructured.Unstructured {
	c.t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		c.t.Fatalf("encode %s %s/%s: %v", c.binding.GVK.Kind, b.GetNamespace(), b.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(c.binding.GVK)
	return u
}

func (c *Bindings[T, PT]) decode(u *unstructured.Unstructured) PT {
	c.t.Helper()
	out := PT(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		c.t.Fatalf("decode %s %s/%s: %v", c.binding.GVK.Kind, u.GetNamespace(), u.GetName(), err)
	}
	return out
}
