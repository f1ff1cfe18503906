package bench

import (
	"io"
	"log"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// controller-runtime logs through a process-wide logger and complains
	// on stderr when none is set; the benchmarks want neither.
	ctrllog.SetLogger(logr.Discard())
	// controller-runtime's http.Server has no ErrorLog, so it writes to the
	// standard logger, whose lines (a handshake cut short when a server
	// stops) would split benchmark result lines that benchstat then drops.
	log.SetOutput(io.Discard)
	code := m.Run()
	removeBinaries()
	os.Exit(code)
}
