package envtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBinaryDirFollowsBinDirAndMinor: BinaryDir names the directory Start
// would take, v<minor> below BinDir for an older minor, and says what is
// missing otherwise.
func TestBinaryDirFollowsBinDirAndMinor(t *testing.T) {
	t.Setenv(KubeMinorEnv, "") // the older minor's pass sets it: an empty KubeMinor then means that minor
	dir := t.TempDir()
	older := filepath.Join(dir, "v1.36")
	for _, d := range []string{dir, older} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{etcdBinary, apiServerBinary} {
			if err := os.WriteFile(filepath.Join(d, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		minor, want string
	}{{"", dir}, {NewestMinor, dir}, {"1.36", older}} {
		got, err := BinaryDir(Options{BinDir: dir, KubeMinor: tc.minor})
		if err != nil || got != tc.want {
			t.Errorf("BinaryDir(minor %q) = %q, %v; want %q", tc.minor, got, err, tc.want)
		}
	}
	_, err := BinaryDir(Options{BinDir: dir, ControllerManager: true})
	if !errors.Is(err, ErrBinariesMissing) {
		t.Errorf("BinaryDir with ControllerManager and no kube-controller-manager: %v, want ErrBinariesMissing", err)
	}
}
