package policy

import (
	"context"
	"fmt"
)

// Admission is how a process admits the subjects of its declarative
// Binding kinds (package declarative). Kinds that write Do and Undo are
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

type admissionKey struct{}

// WithAdmission records the process's choice (sharedmain's
// --declarative-admission) for the admission constructors it calls: a
// process-wide setting, read once when each is built.
func WithAdmission(ctx context.Context, a Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// AdmissionFrom returns the choice WithAdmission recorded, ByPolicy when
// there is none.
func AdmissionFrom(ctx context.Context) Admission {
	if a, ok := ctx.Value(admissionKey{}).(Admission); ok && a != "" {
		return a
	}
	return ByPolicy
}
