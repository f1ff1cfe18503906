package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/envtest"
)

// toolsModule returns the directory of the repository's tools module that
// builds minor's control plane into bin/.
func toolsModule(minor string) string {
	dir := filepath.Join("..", "..", "hack", "tools")
	if minor != envtest.NewestMinor {
		dir = filepath.Join(dir, "k8s"+strings.ReplaceAll(minor, ".", ""))
	}
	return dir
}

// TestBuildModulesAreTheToolsModules: `bindkit controlplane` builds from
// copies of the tools modules `make tools` builds from; with -update the
// test refreshes the copies.
func TestBuildModulesAreTheToolsModules(t *testing.T) {
	for _, minor := range envtest.SupportedMinors() {
		for _, f := range []struct{ embedded, tools string }{
			{"controlplane/" + minor + "/go.mod.txt", filepath.Join(toolsModule(minor), "go.mod")},
			{"controlplane/" + minor + "/go.sum.txt", filepath.Join(toolsModule(minor), "go.sum")},
			{"controlplane/etcd.go.txt", filepath.Join(toolsModule(envtest.NewestMinor), "etcd", "main.go")},
			{"controlplane/kwok/go.mod.txt", filepath.Join(toolsModule(envtest.NewestMinor), "kwok", "go.mod")},
			{"controlplane/kwok/go.sum.txt", filepath.Join(toolsModule(envtest.NewestMinor), "kwok", "go.sum")},
		} {
			want, err := os.ReadFile(f.tools)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(f.embedded, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := buildModules.ReadFile(f.embedded)
			if err != nil {
				t.Fatalf("Kubernetes %s: %v", minor, err)
			}
			if diff := cmp.Diff(lines(want), lines(got)); diff != "" {
				t.Errorf("cmd/bindkit/%s differs from %s (-tools +embedded); run make generate:\n%s", f.embedded, f.tools, diff)
			}
		}
	}
}

// TestBuildModuleBuildsTheRelease writes each minor's build module and
// checks, with go list, that it pins the release envtest names.
func TestBuildModuleBuildsTheRelease(t *testing.T) {
	for _, r := range envtest.Releases() {
		dir := t.TempDir()
		if err := writeBuildModule(r, dir); err != nil {
			t.Fatal(err)
		}
		out, err := goIn(t.Context(), dir, "list", "-m", "-f", "{{.Path}} {{.Version}}", "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3")
		if err != nil {
			t.Fatalf("Kubernetes %s: %v", r.Minor, err)
		}
		want := "k8s.io/kubernetes " + r.Kubernetes + "\ngo.etcd.io/etcd/server/v3 " + r.Etcd + "\n"
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("Kubernetes %s: build module (-want +got):\n%s", r.Minor, diff)
		}
		if _, err := releaseTime(t.Context(), dir); err != nil {
			t.Errorf("Kubernetes %s: %v", r.Minor, err)
		}
	}
}

// fakeCache points the user cache (and setup-envtest's store) at empty
// temporary directories and puts stub executables for releases into the
// cache.
func fakeCache(t *testing.T, releases ...envtest.Release) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv(envtest.KubebuilderAssetsEnv, "")
	for _, r := range releases {
		dir, err := envtest.CacheDir(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range append(envtest.Binaries(), "kwok") {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestControlPlaneBuildsNothingWhenThere: with every minor's binaries in
// the cache, neither the default (the newest minor) nor -minor all builds
// anything, and the default speaks only of the newest minor.
func TestControlPlaneBuildsNothingWhenThere(t *testing.T) {
	fakeCache(t, envtest.Releases()...)
	tests := []struct {
		args []string
		want []envtest.Release
	}{
		{args: []string{"controlplane"}, want: envtest.Releases()[:1]},
		{args: []string{"controlplane", "-minor", "all"}, want: envtest.Releases()},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), tt.args, &stdout, &stderr); err != nil {
			t.Fatalf("bindkit %s: %v\n%s", strings.Join(tt.args, " "), err, stderr.Bytes())
		}
		for _, r := range envtest.Releases() {
			want := "Kubernetes " + r.Kubernetes + " and etcd " + r.Etcd + " are in "
			if got := strings.Contains(stdout.String(), want); got != slices.Contains(tt.want, r) {
				t.Errorf("bindkit %s: output mentions %s: %v, want %v:\n%s", strings.Join(tt.args, " "), r.Minor, got, !got, stdout.String())
			}
		}
	}
}

// TestControlPlaneUsesKubebuilderAssets: a KUBEBUILDER_ASSETS directory
// holding the binaries of the newest minor and kwok (those built here) makes
// `bindkit controlplane` build nothing and say which binaries it used.
func TestControlPlaneUsesKubebuilderAssets(t *testing.T) {
	assets := os.Getenv(envtest.BinDirEnv)
	if assets == "" || len(missingBinaries(assets)) > 0 || !isExecutable(filepath.Join(assets, "kwok")) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s=%q lacks the newest minor's binaries (make tools)", envtest.BinDirEnv, assets)
		}
		t.Skipf("no built binaries in %s=%q (make tools)", envtest.BinDirEnv, assets)
	}
	fakeCache(t)
	t.Setenv(envtest.KubebuilderAssetsEnv, assets)
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"controlplane"}, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit controlplane: %v\n%s", err, stderr.Bytes())
	}
	r := envtest.Releases()[0]
	if want := "Kubernetes " + r.Minor + ": nothing to build"; !strings.Contains(stdout.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, stdout.String())
	}
	if want := "using " + filepath.Join(assets, "kwok") + " (kwok " + envtest.Kwok + ")"; !strings.Contains(stdout.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, stdout.String())
	}
	for _, name := range envtest.Binaries() {
		if want := "using " + filepath.Join(assets, name) + " (version "; !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	dir, err := envtest.CacheDir(r)
	if err != nil {
		t.Fatal(err)
	}
	if missing := missingBinaries(dir); len(missing) > 0 {
		t.Errorf("cache %s lacks %v after adopting %s", dir, missing, assets)
	}
}

// TestAdoptSkipsBinariesOfAnotherMinor: a binary reporting another minor,
// or no version, is named and not used.
func TestAdoptSkipsBinariesOfAnotherMinor(t *testing.T) {
	assets, cache := t.TempDir(), t.TempDir()
	scripts := map[string]string{
		"kube-apiserver":          "echo Kubernetes v1.30.1",
		"kube-controller-manager": "echo nonsense",
		"kube-scheduler":          "echo Kubernetes v1.37.0",
		"etcd":                    "echo etcd Version: 3.4.0",
	}
	for name, script := range scripts {
		if err := os.WriteFile(filepath.Join(assets, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := envtest.Release{Minor: "1.37", Kubernetes: "v1.37.2", Etcd: "v3.7.3"}
	var stdout bytes.Buffer
	if err := adoptBinaries(t.Context(), r, cache, []string{assets}, &stdout); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kube-apiserver", "kube-controller-manager", "etcd"}, missingBinaries(cache)); diff != "" {
		t.Errorf("binaries still missing after adopting (-want +got):\n%s\n%s", diff, stdout.String())
	}
	for _, want := range []string{
		"version 1.30.1 does not fit Kubernetes 1.37",
		"kube-controller-manager --version printed no version",
		"version 3.4.0 does not fit",
		"kube-scheduler (version 1.37.0) for Kubernetes 1.37",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestControlPlaneRejectsAnUnsupportedMinor(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"controlplane", "-minor", "1.20"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "1.20 is not supported") {
		t.Errorf("bindkit controlplane -minor 1.20: %v, want an error naming the minor", err)
	}
}

func TestVersionStamp(t *testing.T) {
	got := versionStamp("v1.37.1", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.37.1",
		"-X k8s.io/component-base/version.gitMinor=37",
		"-X k8s.io/client-go/pkg/version.gitMajor=1",
		"-X k8s.io/client-go/pkg/version.buildDate=2026-05-01T12:00:00Z",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("versionStamp lacks %q: %s", want, got)
		}
	}
}

func TestReportProgressKeepsMessages(t *testing.T) {
	var stdout, messages bytes.Buffer
	reportProgress(strings.NewReader("k8s.io/api/core/v1\n# k8s.io/x\nx.go:1: undefined: y\n"), 1, time.Now(), &stdout, &messages)
	if diff := cmp.Diff("# k8s.io/x\nx.go:1: undefined: y\n", messages.String()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}
