package authority_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

// controlPlane runs workloads (their pods run, on kwok's nodes) and the
// controller that aggregates the kinds' roles into admin, edit and view.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads:   true,
	Controllers: append(testenv.DefaultControllers(), "clusterrole-aggregation-controller"),
	CRDPaths:    []string{"../../config/300-githubbinding.yaml", "../../examples/sinkbinding/config/300-sinkbinding.yaml"},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
