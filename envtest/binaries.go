package envtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// BinDirEnv names the environment variable that overrides where the
// control-plane binaries are looked for: a directory holding the newest
// minor's binaries, and every other minor's in a subdirectory named after
// it (v1.36), as bindkit's `make tools` lays out its bin/ directory.
const BinDirEnv = "BINDKIT_BIN_DIR"

// KubeMinorEnv names the environment variable that picks the Kubernetes
// minor Start runs when Options.KubeMinor is empty, for example "1.36".
const KubeMinorEnv = "BINDKIT_KUBE_MINOR"

// Release is one supported Kubernetes minor and the exact versions its
// control plane is built from.
type Release struct {
	// Minor is the Kubernetes minor, such as "1.37".
	Minor string
	// Kubernetes is the k8s.io/kubernetes version of kube-apiserver,
	// kube-controller-manager and kube-scheduler, such as "v1.37.2".
	Kubernetes string
	// Etcd is the go.etcd.io/etcd/server/v3 version of etcd.
	Etcd string
}

// Releases returns the Kubernetes minors bindkit is tested against, newest
// first, with the versions of their binaries: those bindkit's tools
// modules (hack/tools) pin, and those `bindkit controlplane` builds.
func Releases() []Release {
	return []Release{
		{Minor: "1.37", Kubernetes: "v1.37.2", Etcd: "v3.7.3"},
		{Minor: "1.36", Kubernetes: "v1.36.4", Etcd: "v3.6.8"},
	}
}

// ReleaseOf returns the release of a supported minor ("1.36" or "v1.36").
func ReleaseOf(minor string) (Release, error) {
	minor = strings.TrimPrefix(minor, "v")
	for _, r := range Releases() {
		if r.Minor == minor {
			return r, nil
		}
	}
	return Release{}, fmt.Errorf("Kubernetes %s is not supported; supported: %s", minor, strings.Join(SupportedMinors(), ", "))
}

// NewestMinor is the newest Kubernetes minor bindkit is tested against, the
// one Start runs by default.
const NewestMinor = "1.37"

// SupportedMinors returns the Kubernetes minors bindkit is tested against,
// newest first.
func SupportedMinors() []string {
	var out []string
	for _, r := range Releases() {
		out = append(out, r.Minor)
	}
	return out
}

// The executables Start needs in the bin directory.
const (
	etcdBinary              = "etcd"
	apiServerBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
	schedulerBinary         = "kube-scheduler"
)

// Binaries returns the names of the executables of a control plane, each
// built into the same directory.
func Binaries() []string {
	return []string{apiServerBinary, controllerManagerBinary, schedulerBinary, etcdBinary}
}

// BuildCommand is the command that puts the newest minor's control plane
// into the user cache directory (CacheDir), run from a module that lists
// bindkit as a tool (as `bindkit new` makes it): it uses binaries of that
// minor already on the machine (KUBEBUILDER_ASSETS, setup-envtest's
// directory) and builds the rest from the Go module proxy. Add -minor 1.36
// for another minor, -minor all for every one.
const BuildCommand = "go tool bindkit controlplane"

// CacheDir returns where `bindkit controlplane` puts the binaries of
// release, and where Start looks for them when neither Options.BinDir nor
// BinDirEnv says otherwise: <user cache directory>/bindkit/controlplane/
// kubernetes-<version>-etcd-<version>, e.g. on Linux
// ~/.cache/bindkit/controlplane/kubernetes-v1.37.2-etcd-v3.7.3. Each
// release has a directory of its own, so upgrading bindkit builds the new
// release beside the old one rather than over it.
func CacheDir(release Release) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("user cache directory: %w", err)
	}
	return filepath.Join(base, "bindkit", "controlplane", "kubernetes-"+release.Kubernetes+"-etcd-"+release.Etcd), nil
}

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

// resolveBinDir returns the directory that holds the binaries of minor,
// after checking that every binary in names is there:
//
//   - given dir, else $BINDKIT_BIN_DIR: that directory for the newest
//     minor, its subdirectory v<minor> for any other;
//   - else the first that holds them all, of the minor, of: the minor's
//     CacheDir, $KUBEBUILDER_ASSETS, the module's bin/ (bin/v<minor>) and
//     bin/k8s/*, setup-envtest's store (ExistingBinaryDirs), as `bindkit
//     controlplane` looks.
//
// A missing binary is reported as ErrBinariesMissing, with where it was
// looked for and the fastest way to get it.
func resolveBinDir(dir, minor string, names []string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		found, looked := findBinDir(minor, names)
		if found == "" {
			return "", fmt.Errorf("%w: Kubernetes %s's %s are in none of %s; %s", ErrBinariesMissing, minor,
				strings.Join(names, ", "), strings.Join(looked, ", "), HowToGetBinaries(minor))
		}
		return found, nil
	}
	howToBuild := fmt.Sprintf("%s is set: put Kubernetes %s's binaries there (bindkit's own repository: `make tools`)", BinDirEnv, minor)
	if minor != NewestMinor {
		dir = filepath.Join(dir, "v"+minor)
		howToBuild = fmt.Sprintf("%s is set: put Kubernetes %s's binaries in %s (bindkit's own repository: `make tools`)", BinDirEnv, minor, dir)
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("%w: Kubernetes %s: %s: %v; %s", ErrBinariesMissing, minor, path, errors.Unwrap(err), howToBuild)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s is not an executable file", ErrBinariesMissing, path)
		}
	}
	return dir, nil
}

// HowToGetBinaries says the fastest way to get a minor's control plane
// where Start finds it.
func HowToGetBinaries(minor string) string {
	cmd := BuildCommand
	if minor != NewestMinor {
		cmd += " -minor " + minor
	}
	return fmt.Sprintf("the fastest way to get them: `%s`, which takes binaries of the minor from $%s or setup-envtest's directory "+
		"in seconds and builds only what is missing (all of it: once, about 10 minutes on 2 cores); or point %s at a directory holding them",
		cmd, KubebuilderAssetsEnv, BinDirEnv)
}
