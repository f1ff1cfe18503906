package psbinding

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{"testdata/crds.yaml"}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
