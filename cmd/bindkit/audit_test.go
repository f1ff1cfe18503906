package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// TestAuditExitStatusIsWhatItsHelpSays: bindkit audit exits 3 with
// findings (as kubectl bindkit audit does, and as its help and the README
// say), 1 for an error, 2 for bad usage, 0 otherwise.
func TestAuditExitStatusIsWhatItsHelpSays(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{errUsage, 2},
		{errFindings, 3},
		{fmt.Errorf("audit: %w", errFindings), 3},
		{errors.New("audit: list deployments: connection refused"), 1},
	} {
		if got := exitStatus(tc.err); got != tc.want {
			t.Errorf("exitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"audit", "-h"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("bindkit audit -h: %v", err)
	}
	help := strings.Join(strings.Fields(stderr.String()), " ")
	if want := fmt.Sprintf("Exit status: 0 with no finding, %d with findings", exitStatus(errFindings)); !strings.Contains(help, want) {
		t.Errorf("bindkit audit -h does not say %q:\n%s", want, stderr.String())
	}
}
