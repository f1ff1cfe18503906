package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinDirEnv names the environment variable that overrides where the
// control-plane binaries are looked for.
const BinDirEnv = "BINDKIT_BIN_DIR"

// modulePath identifies the repository root while walking up from the working
// directory.
const modulePath = "github.com/bindkit/bindkit"

// binaries are the executables Start needs in the bin directory.
var binaries = []string{"etcd", "kube-apiserver"}

// resolveBinDir returns dir, else $BINDKIT_BIN_DIR, else <module root>/bin,
// after checking that every binary is there. A missing binary is reported as
// ErrBinariesMissing.
func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %v; set %s", ErrBinariesMissing, err, BinDirEnv)
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range binaries {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v (build them with `make tools`)", ErrBinariesMissing, name, err)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s is not an executable file", ErrBinariesMissing, path)
		}
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to the directory whose
// go.mod declares the bindkit module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if isBindkitModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func isBindkitModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}
