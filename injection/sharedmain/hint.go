package sharedmain

import (
	"errors"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// checkHint names what to check for a start-up failure of a common cause,
// or "" when err is of none of them; the log of a failed start carries it
// so that the operator looks at the cause, not at the retries logged
// before it.
func checkHint(err error) string {
	var netErr *net.OpError
	switch {
	case err == nil:
		return ""
	case apierrors.IsForbidden(err):
		return "the ServiceAccount's RBAC: the ClusterRole and Role in config/ (kubectl auth can-i --as=system:serviceaccount:<namespace>:<name> ...)"
	case apierrors.IsUnauthorized(err):
		return "the credentials: --kubeconfig, or the ServiceAccount token mounted in the Pod"
	case apierrors.IsNotFound(err):
		return "that what the error names exists: SYSTEM_NAMESPACE, the certificates Secret and the MutatingWebhookConfiguration from config/, the CRDs"
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &netErr) && netErr.Op == "dial":
		return "that the kube-apiserver is reachable: --kubeconfig, --server"
	case errors.Is(err, syscall.EADDRINUSE), errors.As(err, &netErr) && netErr.Op == "listen":
		return "that the webhook's, metrics' and probes' ports are free (--webhook-port, --probe-port, --metrics-address)"
	}
	return ""
}
