package main

import (
	"strings"
	"testing"
)

// TestVersionCommand: bindkit version, and --version, print the build
// information; an argument is a usage error.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr strings.Builder
		if err := run(t.Context(), args, &stdout, &stderr); err != nil {
			t.Fatalf("bindkit %v: %v\n%s", args, err, stderr.String())
		}
		if !strings.HasPrefix(stdout.String(), "module: github.com/bindkit/bindkit ") || !strings.Contains(stdout.String(), "\ngo: go1.") {
			t.Errorf("bindkit %v printed %q", args, stdout.String())
		}
	}
	var stdout, stderr strings.Builder
	if err := run(t.Context(), []string{"version", "x"}, &stdout, &stderr); err != errUsage {
		t.Errorf("bindkit version x: %v, want a usage error", err)
	}
}
