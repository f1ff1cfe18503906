package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/bindkit/bindkit/injection/sharedmain"
)

// runVersion prints the module version and VCS revision this bindkit was
// built from (the build information the go command embeds), as the
// controllers' --version does: in a module that requires bindkit, `go
// tool bindkit version` names the bindkit version the module requires.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bindkit version\n\nPrints the module version and VCS revision bindkit was built from.")
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	_, err := fmt.Fprint(stdout, sharedmain.ReadBuildInfo())
	return err
}
