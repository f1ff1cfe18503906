package injection

import (
	"context"
	"os"
)

// SystemNamespaceEnv is the environment variable a Deployment sets (from
// the downward API) to the namespace the process runs in.
const SystemNamespaceEnv = "SYSTEM_NAMESPACE"

type systemNamespaceKey struct{}

// WithSystemNamespace returns a copy of ctx that carries the namespace the
// process runs in: where its certificates Secret and leader-election Lease
// live, and which its webhook never mutates.
func WithSystemNamespace(ctx context.Context, namespace string) context.Context {
	return context.WithValue(ctx, systemNamespaceKey{}, namespace)
}

// TrySystemNamespace is SystemNamespace that reports a missing namespace
// instead of panicking.
func TrySystemNamespace(ctx context.Context) (string, bool) {
	if ns, ok := ctx.Value(systemNamespaceKey{}).(string); ok && ns != "" {
		return ns, true
	}
	if ns := os.Getenv(SystemNamespaceEnv); ns != "" {
		return ns, true
	}
	return "", false
}

// SystemNamespace returns the namespace stored by WithSystemNamespace, else
// $SYSTEM_NAMESPACE. It panics when neither is set: a webhook that does not
// know its own namespace could block its own start.
func SystemNamespace(ctx context.Context) string {
	if ns, ok := TrySystemNamespace(ctx); ok {
		return ns
	}
	panic("injection: no system namespace; set " + SystemNamespaceEnv + " or build the context with injection.WithSystemNamespace")
}
