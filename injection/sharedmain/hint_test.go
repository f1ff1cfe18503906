package sharedmain

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCheckHint(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("something else"), ""},
		{fmt.Errorf("certificates: %w", apierrors.NewForbidden(gr, "webhook-certs", errors.New("no"))), "RBAC"},
		{apierrors.NewUnauthorized("no"), "credentials"},
		{fmt.Errorf("x: %w", apierrors.NewNotFound(gr, "webhook-certs")), "SYSTEM_NAMESPACE"},
		{fmt.Errorf("x: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "kube-apiserver is reachable"},
		{fmt.Errorf("x: %w", &net.OpError{Op: "listen", Err: syscall.EADDRINUSE}), "ports are free"},
	} {
		got := checkHint(tc.err)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("checkHint(%v) = %q, want one with %q", tc.err, got, tc.want)
		}
	}
}
