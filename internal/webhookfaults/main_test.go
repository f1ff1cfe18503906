package webhookfaults_test

import (
	"testing"

	"github.com/bindkit/bindkit/internal/testenv"
	"github.com/bindkit/bindkit/internal/webhookfaults"
)

const repoRoot = "../.."

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{repoRoot + "/" + webhookfaults.CRDPath}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
