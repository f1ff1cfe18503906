package testenv_test

import (
	"testing"

	"github.com/bindkit/bindkit/internal/testenv"
)

// controlPlane runs kube-controller-manager too: the package tests it.
var controlPlane = testenv.Shared{Options: testenv.Options{ControllerManager: true}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
