package main

import (
	"bytes"
	"os"
	"path/filepath"
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

func TestControlPlaneBuildsNothingWhenThere(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	for _, r := range envtest.Releases() {
		dir, err := envtest.CacheDir(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range envtest.Binaries() {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"controlplane"}, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit controlplane: %v\n%s", err, stderr.Bytes())
	}
	for _, r := range envtest.Releases() {
		if want := "Kubernetes " + r.Kubernetes + " and etcd " + r.Etcd + " are in "; !strings.Contains(stdout.String(), want) {
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
