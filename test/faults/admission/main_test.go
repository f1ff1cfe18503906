package admission_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
)

const repoRoot = "../../.."

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{repoRoot + "/" + faults.CRDPath}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
