package githubbinding

import (
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/wiring"
)

// Names the controller and webhook run under; config/ declares the same.
const (
	// ControllerName names the reconciler's work queue, logs and events.
	ControllerName = "githubbindings"
	// WebhookConfigurationName is the MutatingWebhookConfiguration (and the
	// webhook in it) that config/500-webhook-configuration.yaml installs
	// and the webhook's admission controller programs.
	WebhookConfigurationName = "githubbindings.webhook.bindkit.dev"
	// WebhookPath is where the webhook server routes GithubBinding
	// admission requests.
	WebhookPath = "/githubbindings"
)

// New wires GithubBindings with one call: its Controller binds the
// subjects of every GithubBinding that already exist, and unbinds them when
// the Binding is deleted; its Webhook binds subjects as they are created or
// updated and keeps the MutatingWebhookConfiguration
// WebhookConfigurationName pointed at the subjects' kinds with the current
// CA bundle. Both are sharedmain constructors that read only the injection
// context and start nothing. The names are spelled out because config/
// predates wiring's defaults; a new Binding leaves them to the defaults.
func New() (*wiring.Kind, error) {
	return wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		ControllerName:           ControllerName,
		WebhookConfigurationName: WebhookConfigurationName,
		WebhookPath:              WebhookPath,
	})
}
