package fixturebinding_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/fixturebinding"
	"github.com/bindkit/bindkit/test/testenv"
)

const repoRoot = "../.."

var controlPlane = testenv.Shared{Options: testenv.Options{
	CRDPaths: []string{repoRoot + "/" + fixturebinding.CRDPath},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
