package policy_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{"../config/300-githubbinding.yaml", "../psbinding/testdata/crds.yaml"}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
