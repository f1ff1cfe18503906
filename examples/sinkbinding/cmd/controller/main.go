package main

import (
	"fmt"
	"os"

	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

func main() {
	binding, err := sinkbinding.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedmain.Main("sinkbinding-controller", binding.Controller, binding.Webhook)
}
