package e2e_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

// controlPlane runs workloads and serves the GithubBinding CRD.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads: true,
	CRDPaths:  []string{"../../config/300-githubbinding.yaml"},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
