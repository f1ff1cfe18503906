package declaredbinding_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/declaredbinding"
	"github.com/bindkit/bindkit/test/testenv"
)

const repoRoot = "../.."

var controlPlane = testenv.Shared{Options: testenv.Options{
	CRDPaths:  []string{repoRoot + "/" + declaredbinding.CRDPath},
	Workloads: true,
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
