package main

import (
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

func main() {
	sharedmain.Main("githubbinding-controller", githubbinding.NewController, githubbinding.NewWebhook)
}
