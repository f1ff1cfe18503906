package main

import (
	"github.com/bindkit/bindkit/examples/configbinding/pkg/reconciler/configbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

func main() {
	sharedmain.Main("configbinding-controller", configbinding.NewController, configbinding.NewWebhook)
}
