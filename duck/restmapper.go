package duck

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// RESTMapper maps kinds to resources with what discovery says the server
// serves, read once and kept in memory. When a kind or resource is not
// found it forgets what it read and asks discovery again, once per call, so
// that CRDs installed after the first read are found. It is safe for
// concurrent use.
type RESTMapper struct {
	deferred *restmapper.DeferredDiscoveryRESTMapper
}

var _ meta.ResettableRESTMapper = (*RESTMapper)(nil)

// NewRESTMapper returns a RESTMapper over client. It does not call the
// server until the first lookup.
func NewRESTMapper(client discovery.DiscoveryInterface) *RESTMapper {
	return &RESTMapper{restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client))}
}

// retry runs lookup, and when it finds no match, resets the cache and runs
// it again. Client-go's deferred mapper only resets when its cache is stale,
// and a memory cache never says it is, so new CRDs would never be seen.
func retry[T any](m *RESTMapper, lookup func() (T, error)) (T, error) {
	v, err := lookup()
	if err != nil && meta.IsNoMatchError(err) {
		m.deferred.Reset()
		v, err = lookup()
	}
	return v, err
}

// KindFor implements meta.RESTMapper.
func (m *RESTMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return retry(m, func() (schema.GroupVersionKind, error) { return m.deferred.KindFor(resource) })
}

// KindsFor implements meta.RESTMapper.
func (m *RESTMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return retry(m, func() ([]schema.GroupVersionKind, error) { return m.deferred.KindsFor(resource) })
}

// ResourceFor implements meta.RESTMapper.
func (m *RESTMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return retry(m, func() (schema.GroupVersionResource, error) { return m.deferred.ResourceFor(input) })
}

// ResourcesFor implements meta.RESTMapper.
func (m *RESTMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return retry(m, func() ([]schema.GroupVersionResource, error) { return m.deferred.ResourcesFor(input) })
}

// RESTMapping implements meta.RESTMapper.
func (m *RESTMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return retry(m, func() (*meta.RESTMapping, error) { return m.deferred.RESTMapping(gk, versions...) })
}

// RESTMappings implements meta.RESTMapper.
func (m *RESTMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return retry(m, func() ([]*meta.RESTMapping, error) { return m.deferred.RESTMappings(gk, versions...) })
}

// ResourceSingularizer implements meta.RESTMapper.
func (m *RESTMapper) ResourceSingularizer(resource string) (string, error) {
	return m.deferred.ResourceSingularizer(resource)
}

// Reset implements meta.ResettableRESTMapper: the next lookup reads
// discovery again.
func (m *RESTMapper) Reset() { m.deferred.Reset() }

// ResourceFor returns the resource that serves gvk, as mapper says: the
// plural that discovery lists, never a guess. The error names gvk and wraps
// the mapper's, so meta.IsNoMatchError tells an unknown kind.
func ResourceFor(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("resource for %s: %w", gvkString(gvk), err)
	}
	return mapping.Resource, nil
}

// gvkString formats a kind as apiVersion and kind: "apps/v1 Deployment".
func gvkString(gvk schema.GroupVersionKind) string {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return apiVersion + " " + kind
}
