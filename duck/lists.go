package duck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"
)

// NewDynamicClient returns a dynamic client for cfg, as
// dynamic.NewForConfig does, whose List decodes each page once: every
// item is decoded from the page's bytes once, as client-go decodes an
// object. client-go's List reads a page three times over and decodes all
// of it into a map it then throws away before decoding each item again:
// twice the CPU, bytes and allocations of decoding the items, for a page
// of 100 realistic Deployments (duck.BenchmarkDecodeList; bench/RESULTS.md,
// 2026-11-27), and a reconciler binding a selector's subjects lists them
// page by page.
// Every other call is the dynamic client's.
func NewDynamicClient(cfg *rest.Config) (dynamic.Interface, error) {
	config := dynamic.ConfigFor(cfg)
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	// As the dynamic client makes its own: no group version, every path
	// absolute.
	config.GroupVersion = nil
	config.APIPath = "/"
	raw, err := rest.UnversionedRESTClientForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	return &pagedDynamic{Interface: dyn, raw: raw, inexact: &resourceSet{}}, nil
}

// pagedDynamic is a dynamic client whose List is listPage.
type pagedDynamic struct {
	dynamic.Interface
	raw rest.Interface
	// inexact holds the built-in resources whose protobuf pages did not
	// decode exactly (ListRaw): they are read as JSON.
	inexact *resourceSet
}

func (d *pagedDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &pagedResource{NamespaceableResourceInterface: d.Interface.Resource(gvr), raw: d.raw, gvr: gvr, inexact: d.inexact}
}

type pagedResource struct {
	dynamic.NamespaceableResourceInterface
	raw     rest.Interface
	gvr     schema.GroupVersionResource
	inexact *resourceSet
}

func (r *pagedResource) Namespace(ns string) dynamic.ResourceInterface {
	return &pagedNamespaced{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), raw: r.raw, gvr: r.gvr, namespace: ns, inexact: r.inexact}
}

func (r *pagedResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return listPage(ctx, r.raw, r.gvr, "", opts)
}

type pagedNamespaced struct {
	dynamic.ResourceInterface
	raw       rest.Interface
	gvr       schema.GroupVersionResource
	namespace string
	inexact   *resourceSet
}

func (r *pagedNamespaced) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return listPage(ctx, r.raw, r.gvr, r.namespace, opts)
}

// ListRaw is List with the items left undecoded, or decoded into their
// typed objects for the built-in kinds read as protobuf (RawLister).
func (r *pagedNamespaced) ListRaw(ctx context.Context, opts metav1.ListOptions) (*RawList, error) {
	if pl, ok := protobufListOf(r.gvr); ok && !r.inexact.has(r.gvr) {
		body, contentType, err := getPageAs(ctx, r.raw, r.gvr, r.namespace, opts, contentTypeProtobuf+", application/json")
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(contentType, contentTypeProtobuf) {
			return DecodeRawList(body)
		}
		list, exact, err := decodeProtobufPage(body, pl, r.gvr.GroupVersion().String())
		if err != nil || exact {
			return list, err
		}
		// The server's kind has fields this build's types do not, or
		// lacks some they have (another minor): a patch guarded with
		// the typed objects' JSON could fail every test. This resource
		// is read as JSON from now on.
		r.inexact.add(r.gvr)
	}
	body, _, err := getPageAs(ctx, r.raw, r.gvr, r.namespace, opts, "application/json")
	if err != nil {
		return nil, err
	}
	return DecodeRawList(body)
}

// resourceSet is a set of resources, safe for concurrent use.
type resourceSet struct {
	mu  sync.Mutex
	set map[schema.GroupVersionResource]bool
}

func (s *resourceSet) has(gvr schema.GroupVersionResource) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set[gvr]
}

func (s *resourceSet) add(gvr schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[schema.GroupVersionResource]bool{}
	}
	s.set[gvr] = true
}

// RawLister is implemented by the namespaced resource clients of
// NewDynamicClient's clients (Resource(gvr).Namespace(ns)): a LIST page
// whose items are left as the JSON the kube-apiserver sent, or, for the
// built-in workload kinds, decoded from protobuf into their typed
// objects, for a caller that reads each item into what it needs
// (Shape.Decode or Shape.FromObject, GuardJSON of RawObject.Bytes)
// rather than into a map it converts again.
type RawLister interface {
	ListRaw(ctx context.Context, opts metav1.ListOptions) (*RawList, error)
}

// RawList is a LIST page with its items undecoded.
type RawList struct {
	// APIVersion and Kind are the items' (the list's kind without the
	// "List" suffix): a kube-apiserver's JSON list of a built-in kind
	// leaves them out of each item.
	APIVersion, Kind string
	// Continue is the page's continue token, empty on the last page.
	Continue string
	Items    []RawObject
}

// RawObject is an item of a RawList: its JSON, or, for an item of a
// built-in kind that came as protobuf, its typed object. Exactly one of
// JSON and Object is set; Bytes gives the JSON of either.
type RawObject struct {
	Name string // metadata.name
	// JSON is the item as the kube-apiserver sent it, when it sent JSON.
	JSON []byte
	// Object is the item decoded from protobuf (*appsv1.Deployment, say),
	// when the kube-apiserver sent protobuf. Its TypeMeta is empty, as a
	// built-in kind's items in a list are.
	Object runtime.Object
}

// DecodeRawList reads a LIST response's JSON into a RawList: the page is
// validated whole, each item's name read, nothing else decoded. A list
// without a kind, or an item without a name, is an error.
func DecodeRawList(data []byte) (*RawList, error) {
	var page struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &page); err != nil {
		return nil, fmt.Errorf("decode list: %w", err)
	}
	if page.Kind == "" {
		return nil, fmt.Errorf("decode list: no kind in %.100q", data)
	}
	list := &RawList{APIVersion: page.APIVersion, Kind: strings.TrimSuffix(page.Kind, "List"), Continue: page.Metadata.Continue, Items: make([]RawObject, len(page.Items))}
	for i, raw := range page.Items {
		name, found := newJSONDocument(raw).at([]string{"metadata", "name"})
		s, ok := name.(string)
		if !found || !ok || s == "" {
			return nil, fmt.Errorf("decode list: item %d has no metadata.name", i)
		}
		list.Items[i] = RawObject{Name: s, JSON: raw}
	}
	return list, nil
}

// listPage sends the dynamic client's LIST of gvr in namespace (all
// namespaces when empty) and decodes the page with DecodeList.
func listPage(ctx context.Context, raw rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	body, err := getPage(ctx, raw, gvr, namespace, opts)
	if err != nil {
		return nil, err
	}
	return DecodeList(body)
}

// getPage sends the dynamic client's LIST of gvr in namespace (all
// namespaces when empty) and returns the response's JSON.
func getPage(ctx context.Context, raw rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) ([]byte, error) {
	body, _, err := getPageAs(ctx, raw, gvr, namespace, opts, "application/json")
	return body, err
}

// getPageAs sends the LIST of getPage, accepting the media types accept
// names, and returns the response and its content type.
func getPageAs(ctx context.Context, raw rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions, accept string) ([]byte, string, error) {
	if msgs := path.IsValidPathSegmentName(namespace); namespace != "" && len(msgs) > 0 {
		return nil, "", fmt.Errorf("list %s in namespace %q: %s", gvr, namespace, strings.Join(msgs, "; "))
	}
	segments := []string{"api"}
	if gvr.Group != "" {
		segments = []string{"apis", gvr.Group}
	}
	segments = append(segments, gvr.Version)
	if namespace != "" {
		segments = append(segments, "namespaces", namespace)
	}
	segments = append(segments, gvr.Resource)
	var contentType string
	body, err := raw.Get().AbsPath(segments...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, schema.GroupVersion{Version: "v1"}).
		SetHeader("Accept", accept).
		Do(ctx).ContentType(&contentType).Raw()
	return body, contentType, err
}

// DecodeList decodes a LIST response's JSON into an UnstructuredList as
// client-go's unstructured decoding does (field names case-sensitive,
// integers as int64, an item without apiVersion and kind given the
// list's, its kind without the "List" suffix), reading the page once and
// each item once. It keeps the list's apiVersion, kind and metadata; a
// kube-apiserver sends nothing else beside the items. A list without a
// kind is an error, as it is to client-go.
func DecodeList(data []byte) (*unstructured.UnstructuredList, error) {
	var page struct {
		APIVersion *string           `json:"apiVersion"`
		Kind       *string           `json:"kind"`
		Metadata   *map[string]any   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &page); err != nil {
		return nil, fmt.Errorf("decode list: %w", err)
	}
	if page.Kind == nil || *page.Kind == "" {
		return nil, fmt.Errorf("decode list: no kind in %.100q", data)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}, Items: make([]unstructured.Unstructured, len(page.Items))}
	if page.APIVersion != nil {
		list.Object["apiVersion"] = *page.APIVersion
	}
	if page.Kind != nil {
		list.Object["kind"] = *page.Kind
	}
	if page.Metadata != nil {
		list.Object["metadata"] = *page.Metadata
	}
	apiVersion, itemKind := list.GetAPIVersion(), strings.TrimSuffix(list.GetKind(), "List")
	for i, raw := range page.Items {
		item := map[string]any{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &item); err != nil {
			return nil, fmt.Errorf("decode list: item %d: %w", i, err)
		}
		list.Items[i].Object = item
		if list.Items[i].GetKind() == "" && list.Items[i].GetAPIVersion() == "" {
			list.Items[i].SetKind(itemKind)
			list.Items[i].SetAPIVersion(apiVersion)
		}
	}
	return list, nil
}
