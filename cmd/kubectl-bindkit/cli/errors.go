package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// notFoundError is an object or resource type the cluster does not have;
// its message names it.
type notFoundError struct{ what string }

func (e *notFoundError) Error() string { return e.what + " not found" }

// Causes of a failed command, the first word of its one line.
const (
	causeUnreachable  = "unreachable"
	causeRefused      = "refused"
	causeTimedOut     = "timed out"
	causeForbidden    = "forbidden"
	causeUnauthorized = "unauthorized"
	causeNotFound     = "not found"
)

// explain turns err, which a command returned after reaching the
// cluster, into the one line that says what went wrong first; the exit
// status err carries is kept.
func (c *cluster) explain(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err == nil {
			return err
		}
		return &exitError{code: ee.code, err: c.explain(ee.err)}
	}
	cause, detail := causeOf(err, c.server, c.timeout)
	if cause == "" {
		return err
	}
	return errors.New(cause + ": " + detail)
}

// causeOf names what went wrong first in err, a failed request to the
// kube-apiserver at server (with --request-timeout timeout, "" for none),
// and says it in a sentence an operator can act on: "" when err is none
// of the causes (unreachable, refused, timed out, forbidden,
// unauthorized, not found). The checks go from the server's own answer
// to the transport's failures, so a cause that made another (discovery
// failing, so no resource type is known) is the one named.
func causeOf(err error, server, timeout string) (cause, detail string) {
	var status apierrors.APIStatus
	var nf *notFoundError
	var netErr net.Error
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	msg := err.Error()
	switch {
	case apierrors.IsForbidden(err) && errors.As(err, &status):
		return causeForbidden, status.Status().Message
	case apierrors.IsUnauthorized(err):
		return causeUnauthorized, fmt.Sprintf("the server at %s does not accept these credentials (the kubeconfig's user, --token, --as)", server)
	case errors.As(err, &nf):
		return causeNotFound, nf.what
	case apierrors.IsNotFound(err) && errors.As(err, &status):
		return causeNotFound, status.Status().Message
	case meta.IsNoMatchError(err):
		return causeNotFound, msg
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout(),
		strings.Contains(msg, "Client.Timeout exceeded"), strings.Contains(msg, "TLS handshake timeout"), strings.Contains(msg, "i/o timeout"):
		if timeout == "" {
			return causeTimedOut, fmt.Sprintf("the server at %s did not answer in time: is it overloaded, or is something else listening there?", server)
		}
		return causeTimedOut, fmt.Sprintf("the server at %s did not answer within %s (--request-timeout)", server, timeout)
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(msg, "connection refused"):
		return causeUnreachable, fmt.Sprintf("nothing listens at %s (connection refused): is the kube-apiserver running, and is its address right (--server, --context, the kubeconfig)?", server)
	case errors.As(err, &dnsErr):
		return causeUnreachable, fmt.Sprintf("the name of %s does not resolve (%v)", server, dnsErr)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		strings.Contains(msg, "no route to host"), strings.Contains(msg, "network is unreachable"):
		return causeUnreachable, fmt.Sprintf("no route to %s: is the address right, and is the network up?", server)
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), strings.Contains(msg, "x509: "):
		return causeRefused, fmt.Sprintf("the server at %s is not trusted: %s (the kubeconfig's certificate-authority, --certificate-authority)", server, x509Reason(msg))
	case errors.As(err, &recordErr), strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return causeRefused, fmt.Sprintf("the server at %s does not speak TLS: is it a kube-apiserver?", server)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		strings.HasSuffix(msg, ": EOF"), strings.Contains(msg, "connection reset by peer"):
		return causeRefused, fmt.Sprintf("the server at %s closed the connection without answering: is it a kube-apiserver, and may this machine connect to it?", server)
	}
	return "", ""
}

// x509Reason is the part of a certificate error after "x509: ".
func x509Reason(msg string) string {
	if _, after, ok := strings.Cut(msg, "x509: "); ok {
		return after
	}
	return msg
}
