package envtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KubebuilderAssetsEnv names controller-runtime's envtest variable: a
// directory holding etcd and kube-apiserver (and kubectl), as
// setup-envtest prints it.
const KubebuilderAssetsEnv = "KUBEBUILDER_ASSETS"

// ExistingBinaryDirs returns the directories, besides the user cache
// (CacheDir), where control-plane binaries may already be on the machine,
// in the order Start and `bindkit controlplane` prefer them:
// $KUBEBUILDER_ASSETS; the bin directory of the module the process runs
// in (its bin/, then the versions setup-envtest put in bin/k8s/ with
// --bin-dir bin, newest first); setup-envtest's own store, newest first.
// What a directory holds is not checked here: see BinaryVersion and Fits.
func ExistingBinaryDirs() []string {
	var dirs []string
	if d := os.Getenv(KubebuilderAssetsEnv); d != "" {
		dirs = append(dirs, d)
	}
	if root := moduleRoot(); root != "" {
		bin := filepath.Join(root, "bin")
		dirs = append(dirs, bin)
		dirs = append(dirs, versionDirs(filepath.Join(bin, "k8s"))...)
	}
	if store := setupEnvtestStore(); store != "" {
		dirs = append(dirs, versionDirs(store)...)
	}
	return dirs
}

// versionDirs returns the subdirectories of dir, newest name first (they
// are named <version>-<os>-<arch>; a string sort is close enough within a
// minor, and minors are checked by Fits).
func versionDirs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// moduleRoot returns the directory of the go.mod above the working
// directory (a test runs in its package's directory), or "".
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// setupEnvtestStore is where setup-envtest (controller-runtime's tool)
// unpacks its versions, one directory each, by default.
func setupEnvtestStore() string {
	var base string
	switch runtime.GOOS {
	case "windows":
		base = os.Getenv("LocalAppData")
	case "darwin", "ios":
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, "Library", "Application Support", "io.kubebuilder.envtest", "k8s")
		}
	default:
		base = os.Getenv("XDG_DATA_HOME")
		if base == "" {
			if home, err := os.UserHomeDir(); err == nil {
				base = filepath.Join(home, ".local", "share")
			}
		}
	}
	if base == "" {
		return ""
	}
	return filepath.Join(base, "kubebuilder-envtest", "k8s")
}

// versionPattern finds the version a control-plane binary prints for
// --version: "Kubernetes v1.37.2", "etcd Version: 3.6.8".
var versionPattern = regexp.MustCompile(`(?:Kubernetes v|etcd Version: )([0-9]+\.[0-9]+\.[0-9]+)`)

// BinaryVersion runs path --version and returns the version it reports,
// such as "1.37.2" or "3.6.8".
func BinaryVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	m := versionPattern.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version printed no version: %q", path, strings.TrimSpace(string(out)))
	}
	return string(m[1]), nil
}

// Fits says whether a binary named name (etcd, kube-apiserver, ...) of
// version (as BinaryVersion returns it) serves a control plane of minor:
// Kubernetes binaries of that minor (any patch), etcd 3.5 or later.
func Fits(name, version, minor string) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	if name == etcdBinary {
		major, _ := strconv.Atoi(parts[0])
		minorN, _ := strconv.Atoi(parts[1])
		return major == 3 && minorN >= 5
	}
	return parts[0]+"."+parts[1] == minor
}

// findBinDir returns the first of the minor's CacheDir and
// ExistingBinaryDirs (in bin/, its v<minor> subdirectory for a minor
// other than the newest) that holds every binary of names, each of the
// minor (checked with --version, but in the cache, which holds one
// release), and the places it looked.
func findBinDir(minor string, names []string) (string, []string) {
	var looked []string
	if release, err := ReleaseOf(minor); err == nil {
		if dir, err := CacheDir(release); err == nil {
			looked = append(looked, dir)
			if hasExecutables(dir, names) {
				return dir, looked
			}
		}
	}
	for _, dir := range ExistingBinaryDirs() {
		if filepath.Base(dir) == "bin" && minor != NewestMinor {
			dir = filepath.Join(dir, "v"+minor)
		}
		looked = append(looked, dir)
		if hasExecutables(dir, names) && allFit(dir, names, minor) {
			return dir, looked
		}
	}
	return "", looked
}

func hasExecutables(dir string, names []string) bool {
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func allFit(dir string, names []string, minor string) bool {
	for _, name := range names {
		v, err := BinaryVersion(context.Background(), filepath.Join(dir, name))
		if err != nil || !Fits(name, v, minor) {
			return false
		}
	}
	return true
}
