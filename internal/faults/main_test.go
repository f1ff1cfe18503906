package faults_test

import (
	"testing"

	"github.com/bindkit/bindkit/internal/testenv"
	"github.com/bindkit/bindkit/internal/faults"
)

const repoRoot = "../.."

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{repoRoot + "/" + faults.CRDPath}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
