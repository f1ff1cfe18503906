package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEditMakefileKeepsANewerControllerGen: the command makes make
// manifests run bindkit's controller-gen where the project pins an older
// one (or one it cannot read), and keeps the project's own when it is as
// new or newer: a downgrade would undo the user's choice.
func TestEditMakefileKeepsANewerControllerGen(t *testing.T) {
	tests := []struct {
		pinned, want string
	}{
		{pinned: "v0.18.0", want: ControllerToolsVersion},
		{pinned: "v0.9.10", want: ControllerToolsVersion},
		{pinned: ControllerToolsVersion, want: ControllerToolsVersion},
		{pinned: "v0.99.0", want: "v0.99.0"},
		{pinned: "v1.0.0", want: "v1.0.0"},
		{pinned: "$(shell cat .controller-gen-version)", want: ControllerToolsVersion},
	}
	for _, tt := range tests {
		t.Run(tt.pinned, func(t *testing.T) {
			dir := t.TempDir()
			makefile := "CONTROLLER_TOOLS_VERSION ?= " + tt.pinned + "\n" +
				"test: manifests generate fmt vet setup-envtest\n"
			if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o644); err != nil {
				t.Fatal(err)
			}
			e := newEdits(dir)
			if err := editMakefile(e); err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(e.files["Makefile"]), "\n")
			if diff := cmp.Diff("CONTROLLER_TOOLS_VERSION ?= "+tt.want, first); diff != "" {
				t.Errorf("Makefile's pin (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOlderRelease(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"v0.22.9", "v0.23.0", true},
		{"v0.23.0", "v0.23.0", false},
		{"v0.23.1", "v0.23.0", false},
		{"v1.0.0", "v0.23.0", false},
		{"v0.23", "v0.23.0", true},
		{"latest", "v0.23.0", true},
		{"v0.23.0-rc.1", "v0.23.0", true},
	}
	for _, tt := range tests {
		if got := olderRelease(tt.a, tt.b); got != tt.want {
			t.Errorf("olderRelease(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
