package config

import (
	"testing"

	"github.com/bindkit/bindkit/internal/testenv"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { testenv.Main(m, &controlPlane, &audited) }
