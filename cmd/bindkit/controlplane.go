package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/bindkit/bindkit/envtest"
)

// buildModules holds, per supported minor, the go.mod and go.sum of the
// module the control plane is built in: copies of bindkit's tools modules
// (hack/tools for the newest minor, hack/tools/k8s1NN for the others), which
// `make tools` builds bin/ from, so an author's binaries are the ones bindkit
// is tested against. TestBuildModulesAreTheToolsModules keeps them equal.
// They are named .txt because a go.mod would make the directory a module of
// its own, which go:embed cannot reach into.
//
//go:embed controlplane
var buildModules embed.FS

// binaryPackages maps each control-plane executable to the package (in the
// build module) that builds it, so a build can make only what is missing.
var binaryPackages = map[string]string{
	"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
	"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
	"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler",
	"etcd":                    "./etcd",
}

// allMinors is the -minor value that builds every supported minor.
const allMinors = "all"

func runControlPlane(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	minor := fs.String("minor", envtest.NewestMinor, "the Kubernetes `minor` to build (one of "+strings.Join(envtest.SupportedMinors(), ", ")+"), or "+allMinors+" for every one")
	run := fs.Bool("run", false, "then start a control plane of that minor, install the kind of -config into it, print how to run the kind's controller against it, and keep it running until Ctrl-C")
	config := fs.String("config", "config", "with -run: the kind's config `directory`, whose Namespace, CRDs, admission policies and webhook configuration (pointed at 127.0.0.1) are installed")
	webhookPort := fs.Int("webhook-port", 8443, "with -run: the `port` on 127.0.0.1 where the controller will serve its webhook")
	workloads := fs.Bool("workloads", false, "with -run: also run kube-scheduler and kwok's fake nodes, so that workloads' pods are scheduled and become Ready")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: bindkit controlplane [flags]

Puts etcd, kube-apiserver, kube-controller-manager and kube-scheduler of the
newest Kubernetes minor bindkit supports (-minor for another, -minor all for
every one) into the user cache directory where package envtest looks for them
(envtest.CacheDir, e.g. ~/.cache/bindkit/controlplane/kubernetes-v1.37.2-etcd-v3.7.3
on Linux).

Binaries already on the machine are used when their minor fits: those in
$KUBEBUILDER_ASSETS and in setup-envtest's directory (controller-runtime's
envtest ships etcd and kube-apiserver there). What is still missing is
built from the Go module proxy, with progress output: a first build of all
four takes about 6 to 10 minutes on 2 idle cores, downloads included. A
minor whose binaries are in the cache is not built again.
kwok (for envtest's Workloads option) is built beside them once, unless one
of the same version is among the binaries found.

With -run it then starts that control plane (etcd, kube-apiserver,
kube-controller-manager; -workloads adds kube-scheduler and kwok's fake
nodes), installs the kind of -config (its Namespace, CRDs, admission
policies and aggregated roles, and its webhook configuration pointed at
https://127.0.0.1:<-webhook-port>), prints the kubeconfig and the command
that runs the kind's controller against it, and keeps it running until
Ctrl-C, which stops it and removes everything:
  go tool bindkit controlplane -run

Flags:`)
		fs.PrintDefaults()
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if *run && *minor == allMinors {
		return fmt.Errorf("-run starts one minor; -minor %s names every one", allMinors)
	}
	releases := envtest.Releases()
	if *minor != allMinors {
		r, err := envtest.ReleaseOf(*minor)
		if err != nil {
			return err
		}
		releases = []envtest.Release{r}
	}
	for _, r := range releases {
		dir, err := envtest.CacheDir(r)
		if err != nil {
			return err
		}
		if missing := missingBinaries(dir); len(missing) == 0 {
			fmt.Fprintf(stdout, "Kubernetes %s and etcd %s are in %s\n", r.Kubernetes, r.Etcd, dir)
		} else if err := adoptBinaries(ctx, r, dir, envtest.ExistingBinaryDirs(), stdout); err != nil {
			return fmt.Errorf("Kubernetes %s: %w", r.Kubernetes, err)
		} else if missing := missingBinaries(dir); len(missing) == 0 {
			fmt.Fprintf(stdout, "Kubernetes %s: nothing to build; the binaries are in %s\n", r.Minor, dir)
		} else if err := buildControlPlane(ctx, r, dir, missing, stdout); err != nil {
			return fmt.Errorf("building Kubernetes %s into %s: %w", r.Kubernetes, dir, err)
		}
		if err := adoptKwok(ctx, dir, envtest.ExistingBinaryDirs(), stdout); err != nil {
			return err
		}
		if err := buildKwok(ctx, dir, stdout); err != nil {
			return fmt.Errorf("building kwok %s into %s: %w", envtest.Kwok, dir, err)
		}
	}
	if *run {
		return runLocal(ctx, releases[0].Minor, *config, *webhookPort, *workloads, stdout)
	}
	return nil
}

// buildKwok builds kwok (envtest.Options.Workloads) into dir unless it is
// there, in a build module of its own (a copy of hack/tools/kwok: kwok's
// Kubernetes libraries are of another minor than the control plane's),
// through a temporary file renamed into place, so an interrupted build
// leaves no half binary.
func buildKwok(ctx context.Context, dir string, stdout io.Writer) error {
	target := filepath.Join(dir, "kwok")
	if info, err := os.Stat(target); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
		fmt.Fprintf(stdout, "kwok %s is in %s\n", envtest.Kwok, dir)
		return nil
	}
	work, err := os.MkdirTemp(dir, ".build-kwok-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for dst, src := range map[string]string{"go.mod": "controlplane/kwok/go.mod.txt", "go.sum": "controlplane/kwok/go.sum.txt"} {
		data, err := buildModules.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(work, dst), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "building kwok %s into %s (about 2 minutes on 2 cores the first time)\n", envtest.Kwok, dir)
	start := time.Now()
	staging := filepath.Join(work, "kwok")
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-s -w", "-o", staging, "sigs.k8s.io/kwok/cmd/kwok")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	if err := os.Rename(staging, target); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built kwok %s into %s in %s\n", envtest.Kwok, dir, time.Since(start).Round(time.Second))
	return nil
}

// missingBinaries returns the control-plane executables dir lacks, in
// envtest.Binaries' order.
func missingBinaries(dir string) []string {
	var missing []string
	for _, name := range envtest.Binaries() {
		if !isExecutable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	return missing
}

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// writeBuildModule writes release's build module into dir.
func writeBuildModule(r envtest.Release, dir string) error {
	files := map[string]string{
		"go.mod":       "controlplane/" + r.Minor + "/go.mod.txt",
		"go.sum":       "controlplane/" + r.Minor + "/go.sum.txt",
		"etcd/main.go": "controlplane/etcd.go.txt",
	}
	for dst, src := range files {
		data, err := buildModules.ReadFile(src)
		if err != nil {
			return fmt.Errorf("Kubernetes %s: no build module: %w", r.Minor, err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(dst)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, dst), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildControlPlane builds release's executables named in missing into
// dir: in a build module beside it, into a staging directory whose files
// are renamed into dir at the end, so an interrupted build leaves no
// half-written executable that Start would take for whole.
func buildControlPlane(ctx context.Context, r envtest.Release, dir string, missing []string, stdout io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	module, staging := filepath.Join(work, "module"), filepath.Join(work, "bin")
	if err := writeBuildModule(r, module); err != nil {
		return err
	}
	released, err := releaseTime(ctx, module)
	if err != nil {
		return err
	}
	packages := make([]string, 0, len(missing))
	for _, name := range missing {
		packages = append(packages, binaryPackages[name])
	}
	// One go build of every package, so the packages they share are
	// compiled once.
	total, err := countPackages(ctx, module, packages)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "building %s of Kubernetes %s (etcd %s) into %s\n", strings.Join(missing, ", "), r.Kubernetes, r.Etcd, dir)
	fmt.Fprintf(stdout, "  %d packages; a first build takes about %s, later ones reuse the Go build cache\n", total, buildEstimate(missing))
	args := []string{"build", "-v", "-ldflags", "-s -w" + versionStamp(r.Kubernetes, released), "-o", staging + string(filepath.Separator)}
	cmd := exec.CommandContext(ctx, "go", append(args, packages...)...)
	cmd.Dir = module
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	var messages bytes.Buffer
	reportProgress(out, total, start, stdout, &messages)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, messages.Bytes())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range missing {
		if !isExecutable(filepath.Join(staging, name)) {
			return fmt.Errorf("go build made no %s", name)
		}
	}
	for _, name := range missing {
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "built Kubernetes %s into %s in %s\n", r.Kubernetes, dir, time.Since(start).Round(time.Second))
	return nil
}

// packageLine is how `go build -v` names a package it builds; any other
// line on its standard error is a message.
var packageLine = regexp.MustCompile(`^[A-Za-z0-9_./~-]+$`)

// reportProgress reads `go build -v` output, printing a progress line to
// stdout at most every 30 seconds, and keeps every other line in messages.
func reportProgress(r io.Reader, total int, start time.Time, stdout io.Writer, messages *bytes.Buffer) {
	s := bufio.NewScanner(r)
	n, last := 0, start
	for s.Scan() {
		line := s.Text()
		if !packageLine.MatchString(line) {
			messages.WriteString(line + "\n")
			continue
		}
		n++
		if now := time.Now(); now.Sub(last) >= 30*time.Second {
			last = now
			fmt.Fprintf(stdout, "  %d/%d packages, %s\n", n, total, now.Sub(start).Round(time.Second))
		}
	}
}

// versionStamp is the -ldflags that give the Kubernetes binaries the version
// a release build has, so /version reports it (envtest checks it).
func versionStamp(version string, released time.Time) string {
	m := regexp.MustCompile(`^v([0-9]+)\.([0-9]+)\.[0-9]+$`).FindStringSubmatch(version)
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %[1]s.gitMajor=%[2]s -X %[1]s.gitMinor=%[3]s -X %[1]s.gitVersion=%[4]s -X %[1]s.gitTreeState=clean -X %[1]s.buildDate=%[5]s",
			pkg, m[1], m[2], version, released.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// releaseTime returns when the build module's k8s.io/kubernetes was
// published, the build date a release build stamps.
func releaseTime(ctx context.Context, module string) (time.Time, error) {
	out, err := goIn(ctx, module, "list", "-m", "-f", "{{.Time.UTC.Format \"2006-01-02T15:04:05Z\"}}", "k8s.io/kubernetes")
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, strings.TrimSpace(out))
}

// countPackages returns how many packages the build compiles, for progress.
func countPackages(ctx context.Context, module string, packages []string) (int, error) {
	out, err := goIn(ctx, module, append([]string{"list", "-deps"}, packages...)...)
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "\n"), nil
}

func goIn(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Join(fmt.Errorf("go %s: %w", strings.Join(args, " "), err), errors.New(strings.TrimSpace(stderr.String())))
	}
	return string(out), nil
}
