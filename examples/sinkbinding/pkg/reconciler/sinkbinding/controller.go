package sinkbinding

import (
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/wiring"
)

// Names the controller and webhook run under.
const (
	// ControllerName names the reconciler's work queue, logs and events,
	// and is the field manager of what it writes.
	ControllerName = "sinkbindings"
	// WebhookConfigurationName is the MutatingWebhookConfiguration (and the
	// webhook in it) a deployment installs for the webhook path; admitting
	// by policy, the controller empties its rules.
	WebhookConfigurationName = "sinkbindings.webhook.bindkit.dev"
	// WebhookPath is where the webhook server routes SinkBinding admission
	// requests when the webhook admits them.
	WebhookPath = "/sinkbindings"
)

// New wires SinkBindings.
func New() (*wiring.Kind, error) {
	return wiring.New[v1alpha1.SinkBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		ControllerName:           ControllerName,
		WebhookConfigurationName: WebhookConfigurationName,
		WebhookPath:              WebhookPath,
	})
}
