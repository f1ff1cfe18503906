package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/bindkit/bindkit/envtest"
)

// adoptBinaries copies into dir each executable dir lacks that one of
// candidates holds in release's minor (etcd: any 3.5 or later), and says
// which it used. A binary whose version does not fit is named and skipped:
// it is built instead.
func adoptBinaries(ctx context.Context, r envtest.Release, dir string, candidates []string, stdout io.Writer) error {
	for _, name := range missingBinaries(dir) {
		for _, from := range candidates {
			path := filepath.Join(from, name)
			if !isExecutable(path) {
				continue
			}
			version, err := envtest.BinaryVersion(ctx, path)
			if err != nil {
				fmt.Fprintf(stdout, "not using %s: %v\n", path, err)
				continue
			}
			if !envtest.Fits(name, version, r.Minor) {
				fmt.Fprintf(stdout, "not using %s: version %s does not fit Kubernetes %s\n", path, version, r.Minor)
				continue
			}
			if err := copyExecutable(path, filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("using %s: %w", path, err)
			}
			fmt.Fprintf(stdout, "using %s (version %s) for Kubernetes %s\n", path, version, r.Minor)
			break
		}
	}
	return nil
}

// copyExecutable links src as dst, or where it cannot (another file
// system) copies it through a temporary file renamed into place, so a copy
// cut short leaves no half file that passes for whole.
func copyExecutable(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// buildMinutes is roughly how long each binary's first build takes on 2
// idle cores with empty caches, downloads included (measured building
// Kubernetes v1.37.2: all four in about 10 minutes; most of it is shared
// between the three Kubernetes binaries).
var buildMinutes = map[string]float64{
	"kube-apiserver":          6,
	"kube-controller-manager": 2,
	"kube-scheduler":          1,
	"etcd":                    1,
}

// buildEstimate says roughly how long building names takes on this
// machine's cores.
func buildEstimate(names []string) string {
	total := 0.0
	for _, n := range names {
		total += buildMinutes[n]
	}
	total *= 2 / float64(max(runtime.NumCPU(), 1))
	return fmt.Sprintf("%d minutes on %d cores", max(int(total+0.5), 1), runtime.NumCPU())
}

// adoptKwok copies kwok into dir, unless it is there, from the first of
// candidates holding the version envtest.Kwok names, and says so; without
// one, buildKwok builds it.
func adoptKwok(ctx context.Context, dir string, candidates []string, stdout io.Writer) error {
	if isExecutable(filepath.Join(dir, "kwok")) {
		return nil
	}
	for _, from := range candidates {
		path := filepath.Join(from, "kwok")
		if !isExecutable(path) {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "kwok version "+envtest.Kwok+" ") {
			fmt.Fprintf(stdout, "not using %s: not kwok %s (%q)\n", path, envtest.Kwok, strings.TrimSpace(string(out)))
			continue
		}
		if err := copyExecutable(path, filepath.Join(dir, "kwok")); err != nil {
			return fmt.Errorf("using %s: %w", path, err)
		}
		fmt.Fprintf(stdout, "using %s (kwok %s)\n", path, envtest.Kwok)
		return nil
	}
	return nil
}
