// Command kubectl-bindkit is kubectl's plugin for the operators of
// Bindings: plan a Binding's change before it lands, pause, resume and
// undo its rollout, ask a workload which Bindings changed it, audit the
// records bindkit keeps. Install it on the PATH and kubectl finds it:
//
//	go install github.com/bindkit/bindkit/cmd/kubectl-bindkit@latest
//	kubectl bindkit --help
//
// The commands live in package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bindkit/bindkit/cmd/kubectl-bindkit/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
