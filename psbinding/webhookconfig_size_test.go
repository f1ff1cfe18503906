package psbinding

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// Limits of the API on one object: the kube-apiserver refuses a request
// body over 3 MiB, and etcd (--max-request-bytes default) a write over
// 1.5 MiB, which, stored as protobuf, is the tighter one.
const (
	maxRequestBytes = 3 << 20
	maxEtcdBytes    = 3 << 19
)

// namespaceNames returns n distinct namespace names of length size
// (63 is the longest a namespace may have).
func namespaceNames(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		id := fmt.Sprintf("-%06d", i)
		out[i] = strings.Repeat("n", size-len(id)) + id
	}
	return out
}

// configurationSize programs a configuration as config/ installs it (a
// Service client config, a bundle of two CAs) for n namespaces of names of
// size bytes, and returns its JSON and protobuf sizes.
func configurationSize(t testing.TB, n, size int) (jsonBytes, protoBytes int) {
	t.Helper()
	current := installedConfig(admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook"}}, nil)
	spec := webhookSpec{
		webhookName: "bindings.bindkit.dev", path: "/githubbindings",
		caBundle:   []byte(strings.Repeat("C", 2*1200)), // two PEM CAs
		protected:  []string{"bindkit-system", "kube-system", "kube-public", "kube-node-lease"},
		namespaces: namespaceNames(n, size),
		resources: []schema.GroupVersionResource{
			{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "statefulsets"},
			{Group: "batch", Version: "v1", Resource: "cronjobs"}, {Group: "", Version: "v1", Resource: "pods"},
		},
		skipPatchesBy: "githubbinding-controller",
	}
	desired, err := desiredWebhookConfiguration(current, spec)
	if err != nil {
		t.Fatal(err)
	}
	desired.Webhooks[1].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	raw, err := json.Marshal(desired)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw), desired.Size()
}

// The namespaceSelector names up to DefaultMaxSelectorNamespaces
// namespaces; with the longest names a namespace may have, the
// configuration stays under half of what etcd stores and a third of what
// the kube-apiserver accepts, so it still fits beside a large bundle and
// administrators' own webhooks. The sizes at 1,000, 5,000 and 10,000
// namespaces are logged (README, "Blast radius").
func TestWebhookConfigurationSizeAtScale(t *testing.T) {
	for _, n := range []int{1000, 5000, 10000, 20000} {
		for _, size := range []int{20, 63} {
			j, p := configurationSize(t, n, size)
			t.Logf("%6d namespaces, names of %2d bytes: %8d bytes of JSON, %8d bytes of protobuf", n, size, j, p)
		}
	}
	j, p := configurationSize(t, DefaultMaxSelectorNamespaces, 63)
	if j > maxRequestBytes/3 || p > maxEtcdBytes/2 {
		t.Errorf("at DefaultMaxSelectorNamespaces (%d) of 63 bytes: %d bytes of JSON (limit %d), %d of protobuf (limit %d): over the margin", DefaultMaxSelectorNamespaces, j, maxRequestBytes, p, maxEtcdBytes)
	}
}
