package sinkbinding_test

import (
	"testing"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
)

// TestAdmissionPoliciesInConfig keeps the example's config/ holding the
// admission policies its webhook programs on SinkBindings (the authority
// policy, the namespace guard, the record of who asked), so that they
// hold from an install on, with no process running.
func TestAdmissionPoliciesInConfig(t *testing.T) {
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	bindingtest.CheckManifests(t, kind, "../../../config/"+bindingtest.AdmissionPoliciesFileName("sinkbinding"))
}
