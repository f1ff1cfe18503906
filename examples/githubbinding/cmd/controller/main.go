package main

import (
	"fmt"
	"os"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

func main() {
	binding, err := githubbinding.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// binding.Webhook also keeps the namespace guard programmed: a
	// ValidatingAdmissionPolicy that refuses, at create, a Binding whose
	// subject names another namespace.
	sharedmain.Main("githubbinding-controller", binding.Controller, binding.Webhook)
}
