package main

import (
	"fmt"
	"os"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/wiring"
)

func main() {
	binding, err := githubbinding.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The namespace guard refuses, at create, a Binding whose subject names
	// another namespace (a ValidatingAdmissionPolicy it programs and heals).
	sharedmain.Main("githubbinding-controller", binding.Controller, binding.Webhook, wiring.NamespaceGuard(binding))
}
