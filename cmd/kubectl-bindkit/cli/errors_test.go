package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCauseOfNamesWhatWentWrongFirst: each failure client-go returns,
// wrapped as the commands wrap it, is named by its cause in one line.
func TestCauseOfNamesWhatWentWrongFirst(t *testing.T) {
	const server = "https://127.0.0.1:6443"
	dial := func(errno syscall.Errno) error {
		return &url.Error{Op: "Get", URL: server + "/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
	}
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name, timeout string
		err           error
		cause, detail string
	}{
		{"connection refused", "", fmt.Errorf("resource type %q: %w", "deployment", dial(syscall.ECONNREFUSED)), causeUnreachable, "nothing listens at " + server + " (connection refused)"},
		{"no route", "", dial(syscall.EHOSTUNREACH), causeUnreachable, "no route to " + server},
		{"a name that does not resolve", "", &url.Error{Op: "Get", URL: server, Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid"}}}, causeUnreachable, "does not resolve"},
		{"closed without an answer", "", &url.Error{Op: "Get", URL: server, Err: io.EOF}, causeRefused, "closed the connection without answering"},
		{"reset", "", dial(syscall.ECONNRESET), causeRefused, "closed the connection without answering"},
		{"a client timeout", "1s", &url.Error{Op: "Get", URL: server, Err: errors.New("net/http: request canceled (Client.Timeout exceeded while awaiting headers)")}, causeTimedOut, "did not answer within 1s (--request-timeout)"},
		{"a deadline", "", fmt.Errorf("get: %w", context.DeadlineExceeded), causeTimedOut, "did not answer in time"},
		{"the server's timeout", "1s", apierrors.NewTimeoutError("request did not complete within 1s", 0), causeTimedOut, "did not answer within 1s"},
		{"forbidden", "", fmt.Errorf("get x: %w", apierrors.NewForbidden(deployments, "web", errors.New(`User "bob" cannot get resource "deployments"`))), causeForbidden, `User "bob" cannot get resource "deployments"`},
		{"unauthorized", "", apierrors.NewUnauthorized("who are you"), causeUnauthorized, "does not accept these credentials"},
		{"no such object", "", &notFoundError{`deployments.apps "nosuch" in namespace "shop"`}, causeNotFound, `deployments.apps "nosuch" in namespace "shop"`},
		{"no such object from the server", "", apierrors.NewNotFound(deployments, "nosuch"), causeNotFound, `deployments.apps "nosuch" not found`},
		{"no such resource type", "", &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{Resource: "nosuch"}}, causeNotFound, "nosuch"},
		{"not TLS", "", &url.Error{Op: "Get", URL: server, Err: errors.New("http: server gave HTTP response to HTTPS client")}, causeRefused, "does not speak TLS"},
		{"an untrusted certificate", "", &url.Error{Op: "Get", URL: server, Err: errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority")}, causeRefused, "is not trusted: certificate signed by unknown authority"},
		{"something else", "", errors.New("sinkbinding/sink is not paused"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cause, detail := causeOf(tc.err, server, tc.timeout)
			if cause != tc.cause || !strings.Contains(detail, tc.detail) || strings.Contains(detail, "\n") {
				t.Errorf("causeOf(%v) = %q, %q; want %q with %q, on one line", tc.err, cause, detail, tc.cause, tc.detail)
			}
		})
	}
}

// TestExplainKeepsTheExitStatus: an error that carries an exit status is
// explained, and still ends the command with its status.
func TestExplainKeepsTheExitStatus(t *testing.T) {
	c := &cluster{server: "https://127.0.0.1:1"}
	err := c.explain(exit(ExitChanges, &url.Error{Op: "Get", URL: "x", Err: syscall.ECONNREFUSED}))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitChanges || !strings.HasPrefix(err.Error(), "unreachable: ") {
		t.Errorf("explain: %v (%#v), want exit %d and the cause", err, err, ExitChanges)
	}
	if err := c.explain(quietExit(ExitPaused)); !errors.As(err, &ee) || ee.code != ExitPaused || ee.err != nil {
		t.Errorf("explain of a quiet exit: %#v", err)
	}
}
