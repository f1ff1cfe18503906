package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
)

// cluster is what a command reaches the cluster with: kubectl's
// connection flags, read as kubectl reads them.
type cluster struct {
	dynamic   dynamic.Interface
	mapper    meta.RESTMapper
	discovery discovery.DiscoveryInterface
	namespace string // --namespace, else the context's, else "default"
	// server and timeout are the kube-apiserver's address and
	// --request-timeout, for the one line that says what went wrong.
	server, timeout string
}

// newCluster reads kubectl's connection flags (--kubeconfig, then
// $KUBECONFIG, then ~/.kube/config; --context, --namespace, --server,
// --as, --token, --request-timeout, ...). No request is sent until a
// command reads something. Warnings the kube-apiserver sends go to
// stderr, as kubectl prints them.
func newCluster(flags *genericclioptions.ConfigFlags, stderr io.Writer) (*cluster, error) {
	flags.WrapConfigFn = func(cfg *rest.Config) *rest.Config {
		cfg.UserAgent = "kubectl-bindkit"
		cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
		return cfg
	}
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: namespace: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := flags.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	mapper, err := flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	timeout := ""
	if flags.Timeout != nil && *flags.Timeout != "0" {
		timeout = *flags.Timeout
	}
	return &cluster{dynamic: dyn, mapper: mapper, discovery: disco, namespace: ns, server: cfg.Host, timeout: timeout}, nil
}

// object is an object a command names: its resource, kind and name.
type object struct {
	gvr  schema.GroupVersionResource
	kind schema.GroupVersionKind
	u    *unstructured.Unstructured
}

// String names the object as kubectl does: "sinkbinding.bindings.bindkit.dev/sink".
func (o *object) String() string {
	return refName(o.kind.GroupKind(), o.u.GetName())
}

// refName is kubectl's name of an object: lower-case kind, group, name.
func refName(gk schema.GroupKind, name string) string {
	kind := strings.ToLower(gk.Kind)
	if gk.Group != "" {
		kind += "." + gk.Group
	}
	return kind + "/" + name
}

// resource resolves a TYPE as kubectl does: a resource, its singular,
// a kind or a short name, optionally qualified by version and group
// ("sinkbindings.v1alpha1.bindings.bindkit.dev").
func (c *cluster) resource(typ string) (schema.GroupVersionResource, schema.GroupVersionKind, error) {
	full, partial := schema.ParseResourceArg(strings.ToLower(typ))
	var gvr schema.GroupVersionResource
	var err error
	if full != nil {
		gvr, err = c.mapper.ResourceFor(*full)
	}
	if full == nil || err != nil {
		gvr, err = c.mapper.ResourceFor(partial.WithVersion(""))
	}
	if meta.IsNoMatchError(err) {
		return gvr, schema.GroupVersionKind{}, &notFoundError{fmt.Sprintf("the server has no resource type %q", typ)}
	}
	if err != nil {
		return gvr, schema.GroupVersionKind{}, fmt.Errorf("resource type %q: %w", typ, err)
	}
	gvk, err := c.mapper.KindFor(gvr)
	if err != nil {
		return gvr, gvk, fmt.Errorf("resource type %q: %w", typ, err)
	}
	return gvr, gvk, nil
}

// get reads the object TYPE/NAME in the command's namespace.
func (c *cluster) get(ctx context.Context, typ, name string) (*object, error) {
	gvr, gvk, err := c.resource(typ)
	if err != nil {
		return nil, err
	}
	u, err := c.dynamic.Resource(gvr).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &notFoundError{fmt.Sprintf("%s %q in namespace %q", gvr.GroupResource(), name, c.namespace)}
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", gvr.GroupResource(), c.namespace, name, err)
	}
	return &object{gvr: gvr, kind: gvk, u: u}, nil
}

// annotate sets (a non-nil value) or removes (nil) annotations of obj,
// with a merge patch, and reads obj back.
func (c *cluster) annotate(ctx context.Context, obj *object, annotations map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	u, err := c.dynamic.Resource(obj.gvr).Namespace(obj.u.GetNamespace()).Patch(ctx, obj.u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kubectl-bindkit"})
	if err != nil {
		return fmt.Errorf("%s: annotate: %w", obj, err)
	}
	obj.u = u
	return nil
}

// bindingStatus is what the commands read of a Binding's status: the
// framework's (duck.Status), and a declarative kind's published Spec.
type bindingStatus struct {
	duck.Status        `json:",inline"`
	Declared           *declarative.Spec `json:"declared,omitempty"`
	DeclaredGeneration int64             `json:"declaredGeneration,omitempty"`
}

// statusOf reads a Binding's status; a status it cannot read reads as
// empty.
func statusOf(u *unstructured.Unstructured) bindingStatus {
	var st bindingStatus
	if m, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		if js, err := json.Marshal(m); err == nil {
			_ = json.Unmarshal(js, &st)
		}
	}
	return st
}
