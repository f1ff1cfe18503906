package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

// TestSinkBindingContract runs the contract kit over SinkBinding, with and
// without a CA certificates Secret: its derived Do and Undo must be
// idempotent and exact inverses on every workload shape.
func TestSinkBindingContract(t *testing.T) {
	for _, caCerts := range []string{"", "sink-ca"} {
		t.Run("caCertsSecret="+caCerts, func(t *testing.T) {
			forwarder := ""
			if caCerts != "" {
				forwarder = "registry.example.com/forwarder:1.2"
			}
			b := &v1alpha1.SinkBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sink", Generation: 1},
				Spec: v1alpha1.SinkBindingSpec{
					Subject:        tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
					Sink:           "https://sink.example.com",
					CACertsSecret:  caCerts,
					ForwarderImage: forwarder,
				},
			}
			if err := b.Declare().Validate(); err != nil {
				t.Fatalf("declared Spec: %v", err)
			}
			bindingtest.CheckContract(t, b, bindingtest.ContractOptions{})
		})
	}
}
