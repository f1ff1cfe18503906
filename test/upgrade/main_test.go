package upgrade

import (
	"testing"

	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../.."

// controlPlane runs workloads (kube-scheduler, kwok's nodes) and serves
// the GithubBinding CRD, which both releases share.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads: true,
	CRDPaths:  []string{repoRoot + "/" + demo.CRDPath},
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
