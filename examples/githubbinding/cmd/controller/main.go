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
	sharedmain.Main("githubbinding-controller", binding.Controller, binding.Webhook)
}
