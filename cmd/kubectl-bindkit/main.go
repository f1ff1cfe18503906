// Command kubectl-bindkit is kubectl's plugin for the operators of
// Bindings: plan a Binding's change before it lands, pause, resume and
// undo its rollout, ask a workload which Bindings changed it (or why
// none does), audit the records bindkit keeps. Install it on the PATH and
// kubectl finds it. It is a module of its own (k8s.io/cli-runtime, which
// reads kubectl's connection flags, never enters the framework's
// dependencies), built against the bindkit beside it, so it is installed
// from a checkout:
//
//	go -C cmd/kubectl-bindkit install .
//	kubectl bindkit --help
//
// The commands live in package cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/bindkit/bindkit/cmd/kubectl-bindkit/cli"
)

func main() {
	// client-go logs through klog (discovery failures, retries); an
	// operator gets one line saying what went wrong instead (cli.Main),
	// so nothing klog is given is printed.
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
