package envtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartRejectsBinariesOfAnotherMinor asks for a minor whose directory
// holds the real binaries of another, and expects Start to refuse them once
// the kube-apiserver reports its version.
func TestStartRejectsBinariesOfAnotherMinor(t *testing.T) {
	minor, err := resolveMinor("")
	if err != nil {
		t.Fatal(err)
	}
	real, err := resolveBinDir("", minor, []string{etcdBinary, apiServerBinary})
	if errors.Is(err, ErrBinariesMissing) && !InCI() {
		t.Skipf("integration test needs a control plane: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	impostor := filepath.Join(root, "v1.99")
	if err := os.Mkdir(impostor, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{etcdBinary, apiServerBinary} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(impostor, name)); err != nil {
			t.Fatal(err)
		}
	}

	env, err := Start(context.Background(), Options{BinDir: root, KubeMinor: "1.99"})
	if err == nil {
		env.Stop()
		t.Fatalf("Start of Kubernetes 1.99 with %s binaries succeeded", minor)
	}
	if want := "reports " + minor; !strings.Contains(err.Error(), want) {
		t.Errorf("error does not contain %q:\n%v", want, err)
	}
}
