package policy

import "fmt"

// Admission is how a process admits the subjects of its declarative
// Binding kinds (package declarative), sharedmain's --declarative-admission;
// it reaches the admission constructors as
// webhook.Options.DeclarativeByWebhook. Kinds that write Do and Undo are
// always admitted by the webhook.
type Admission string

const (
	// ByPolicy admits a declarative kind's subjects with a
	// MutatingAdmissionPolicy where the kube-apiserver serves
	// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, and with the
	// webhook where it does not. The default.
	ByPolicy Admission = "policy"
	// ByWebhook admits them with the webhook, as any other kind: the
	// operator's switch for a cluster where policies are not wanted.
	ByWebhook Admission = "webhook"
)

// Validate reports a value that is neither ByPolicy nor ByWebhook; the
// zero value is valid and means ByPolicy.
func (a Admission) Validate() error {
	switch a {
	case "", ByPolicy, ByWebhook:
		return nil
	}
	return fmt.Errorf("declarative admission %q: want %q or %q", string(a), ByPolicy, ByWebhook)
}
