package duck_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/bindkit/bindkit/duck"
)

func TestRESTMapperFindsNewKindsAfterReset(t *testing.T) {
	disco := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	disco.Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "endpoints", Kind: "Endpoints", Namespaced: true}},
	}}
	mapper := duck.NewRESTMapper(disco)

	got, err := duck.ResourceFor(mapper, schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"})
	if err != nil || got != (schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}) {
		t.Fatalf("ResourceFor(Endpoints) = %v, %v; want v1 endpoints", got, err)
	}
	policy := schema.GroupVersionKind{Group: "example.bindkit.dev", Version: "v1", Kind: "Policy"}
	if _, err := duck.ResourceFor(mapper, policy); !meta.IsNoMatchError(err) {
		t.Fatalf("ResourceFor(unknown Policy) = %v, want a no-match error", err)
	}

	// A CRD installed after the mapper first read discovery.
	disco.Resources = append(disco.Resources, &metav1.APIResourceList{
		GroupVersion: "example.bindkit.dev/v1",
		APIResources: []metav1.APIResource{{Name: "policies", Kind: "Policy", Namespaced: true}},
	})
	got, err = duck.ResourceFor(mapper, policy)
	want := schema.GroupVersionResource{Group: "example.bindkit.dev", Version: "v1", Resource: "policies"}
	if err != nil || got != want {
		t.Errorf("ResourceFor(Policy) after install = %v, %v; want %v", got, err, want)
	}
}
