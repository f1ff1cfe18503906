package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// BinDirEnv names the environment variable that overrides where the
// control-plane binaries are looked for.
const BinDirEnv = "BINDKIT_BIN_DIR"

// KubeMinorEnv names the environment variable that picks the Kubernetes
// minor Start runs when Options.KubeMinor is empty, for example "1.36".
const KubeMinorEnv = "BINDKIT_KUBE_MINOR"

// NewestMinor is the newest Kubernetes minor bindkit is tested against. Its
// binaries sit in the bin directory itself; every other minor's sit in a
// subdirectory named after it (bin/v1.36).
const NewestMinor = "1.37"

// SupportedMinors returns the Kubernetes minors bindkit is tested against,
// newest first. `make tools` builds the binaries of each.
func SupportedMinors() []string { return []string{NewestMinor, "1.36"} }

// modulePath identifies the repository root while walking up from the working
// directory.
const modulePath = "github.com/bindkit/bindkit"

// The executables Start needs in the bin directory.
const (
	etcdBinary              = "etcd"
	apiServerBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
)

var minorPattern = regexp.MustCompile(`^1\.[0-9]+$`)

// resolveMinor returns minor, else $BINDKIT_KUBE_MINOR, else NewestMinor.
func resolveMinor(minor string) (string, error) {
	if minor == "" {
		minor = os.Getenv(KubeMinorEnv)
	}
	if minor == "" {
		return NewestMinor, nil
	}
	minor = strings.TrimPrefix(minor, "v")
	if !minorPattern.MatchString(minor) {
		return "", fmt.Errorf("Kubernetes minor %q (Options.KubeMinor or %s): want the form 1.36", minor, KubeMinorEnv)
	}
	return minor, nil
}

// resolveBinDir returns the directory that holds the binaries of minor:
// the bin root (dir, else $BINDKIT_BIN_DIR, else <module root>/bin) for the
// newest minor, the root's subdirectory v<minor> for any other, after
// checking that every binary in names is there. A missing binary is
// reported as ErrBinariesMissing.
func resolveBinDir(dir, minor string, names []string) (string, error) {
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
	if minor != NewestMinor {
		dir = filepath.Join(dir, "v"+minor)
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("%w: Kubernetes %s: %s: %v (build them with `make tools`)", ErrBinariesMissing, minor, name, err)
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
