package cli

import (
	"context"
	"fmt"

	"github.com/bindkit/bindkit/injection/sharedmain"
)

// versionCommand prints what the plugin was built from, as the
// controllers' --version and `bindkit version` do.
func versionCommand() command {
	return command{
		name:    "version",
		summary: "print the module version and VCS revision the plugin was built from",
		usage:   "kubectl bindkit version",
		run: func(_ context.Context, o *options, args []string) error {
			if len(args) > 0 {
				return usageError(o, "version takes no arguments, got %q", args)
			}
			_, err := fmt.Fprint(o.stdout, sharedmain.ReadBuildInfo())
			return err
		},
	}
}
