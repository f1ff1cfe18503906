package tracker_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }
