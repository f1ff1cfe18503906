package config

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { testenv.Main(m, &controlPlane, &audited) }
