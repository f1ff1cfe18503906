package main

import (
	"fmt"
	"os"

	"github.com/bindkit/bindkit/examples/configbinding/pkg/reconciler/configbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

func main() {
	binding, err := configbinding.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedmain.Main("configbinding-controller", binding.Controller, binding.Webhook)
}
