package injectiontest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// MetadataFromDynamic returns a metadata client that reads through client,
// so that metadata informers over a fake dynamic client see every write
// made through it: client-go's own metadata fake keeps a store of its own.
// Each object is returned as PartialObjectMetadata, as the API server
// returns it to a metadata client (with an empty TypeMeta).
func MetadataFromDynamic(client dynamic.Interface) metadata.Interface {
	return metadataClient{client}
}

type metadataClient struct{ dynamic dynamic.Interface }

// IsWatchListSemanticsUnSupported passes on what the dynamic client says:
// informers ask it before they try a streaming list, which client-go's
// fakes cannot serve.
func (c metadataClient) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.dynamic.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

func (c metadataClient) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return metadataResource{c.dynamic.Resource(gvr)}
}

type metadataResource struct {
	ri dynamic.ResourceInterface
}

var _ metadata.Getter = metadataResource{}

func (r metadataResource) Namespace(ns string) metadata.ResourceInterface {
	if nri, ok := r.ri.(dynamic.NamespaceableResourceInterface); ok {
		return metadataResource{nri.Namespace(ns)}
	}
	return r
}

func (r metadataResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, subresources ...string) error {
	return r.ri.Delete(ctx, name, opts, subresources...)
}

func (r metadataResource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	return r.ri.DeleteCollection(ctx, opts, listOpts)
}

func (r metadataResource) Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := r.ri.Get(ctx, name, opts, subresources...)
	if err != nil {
		return nil, err
	}
	return partial(u), nil
}

func (r metadataResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	list, err := r.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{Items: make([]metav1.PartialObjectMetadata, len(list.Items))}
	out.ResourceVersion = list.GetResourceVersion()
	out.Continue = list.GetContinue()
	for i := range list.Items {
		out.Items[i] = *partial(&list.Items[i])
	}
	return out, nil
}

func (r metadataResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ri.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if u, ok := e.Object.(*unstructured.Unstructured); ok {
			e.Object = partial(u)
		}
		return e, true
	}), nil
}

func (r metadataResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*metav1.PartialObjectMetadata, error) {
	u, err := r.ri.Patch(ctx, name, pt, data, opts, subresources...)
	if err != nil {
		return nil, err
	}
	return partial(u), nil
}

// partial is u's metadata, as a metadata client would return it.
func partial(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name:              u.GetName(),
		GenerateName:      u.GetGenerateName(),
		Namespace:         u.GetNamespace(),
		UID:               u.GetUID(),
		ResourceVersion:   u.GetResourceVersion(),
		Generation:        u.GetGeneration(),
		CreationTimestamp: u.GetCreationTimestamp(),
		DeletionTimestamp: u.GetDeletionTimestamp(),
		Labels:            u.GetLabels(),
		Annotations:       u.GetAnnotations(),
		OwnerReferences:   u.GetOwnerReferences(),
		Finalizers:        u.GetFinalizers(),
	}}
}
