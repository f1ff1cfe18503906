// Command webhook runs the walkthrough's GithubBinding controller and its
// admission webhook, started the knative way with MainWithContext.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/bindkit/bindkit/examples/knativewalkthrough/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/wiring"
)

func main() {
	// knative: ctx := signals.NewContext().
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// knative: MainWithContext parses the command line itself; bindkit's
	// takes its flags from ctx.
	flags, err := sharedmain.ParseFlags("webhook", os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		os.Exit(2) // ParseFlags has printed the error
	}
	ctx = sharedmain.WithFlags(ctx, flags)

	sharedmain.MainWithContext(ctx, "webhook",
		githubbinding.NewController, githubbinding.NewWebhook,
		// Not in knative: the namespace guard, refusing at create a
		// Binding whose subject names another namespace, and the
		// authority policy, refusing one whose author may not patch
		// what it reaches.
		wiring.NamespaceGuardFor(githubbinding.GVR, "webhook"),
		wiring.AuthorityFor(policy.AuthorityOptions{Resource: githubbinding.GVR}, "webhook"),
	)
}
