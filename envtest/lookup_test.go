package envtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBinaries writes shell scripts named names into dir that print
// version for --version, as the real binaries do.
func fakeBinaries(t *testing.T, dir, version string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		line := "Kubernetes v" + version
		if name == etcdBinary {
			line = "etcd Version: 3.6.8"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho '"+line+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResolveBinDirLooksWhereTheCommandDoes: without BINDKIT_BIN_DIR,
// Start takes the binaries from the user cache, else from
// $KUBEBUILDER_ASSETS, the module's bin/ or setup-envtest's store, those
// of the minor asked for only; and says where it looked, and the fastest
// way, when none has them.
func TestResolveBinDirLooksWhereTheCommandDoes(t *testing.T) {
	names := []string{etcdBinary, apiServerBinary}
	newest := Releases()[0]
	tests := []struct {
		name  string
		setup func(t *testing.T, assets, store string) string // returns the directory wanted, "" for none
	}{{
		name: "nothing anywhere",
		setup: func(t *testing.T, assets, store string) string {
			return ""
		},
	}, {
		name: "KUBEBUILDER_ASSETS of the minor",
		setup: func(t *testing.T, assets, store string) string {
			fakeBinaries(t, assets, "1.37.0", names...)
			return assets
		},
	}, {
		name: "KUBEBUILDER_ASSETS of another minor, setup-envtest's store of this one",
		setup: func(t *testing.T, assets, store string) string {
			fakeBinaries(t, assets, "1.30.1", names...)
			dir := filepath.Join(store, "1.37.1-linux-amd64")
			fakeBinaries(t, dir, "1.37.1", names...)
			return dir
		},
	}, {
		name: "the user cache before KUBEBUILDER_ASSETS",
		setup: func(t *testing.T, assets, store string) string {
			fakeBinaries(t, assets, "1.37.0", names...)
			cache, err := CacheDir(newest)
			if err != nil {
				t.Fatal(err)
			}
			fakeBinaries(t, cache, "1.37.2", names...)
			return cache
		},
	}, {
		name: "KUBEBUILDER_ASSETS without etcd",
		setup: func(t *testing.T, assets, store string) string {
			fakeBinaries(t, assets, "1.37.0", apiServerBinary)
			return ""
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assets, data := t.TempDir(), t.TempDir()
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			t.Setenv("XDG_DATA_HOME", data)
			t.Setenv(KubebuilderAssetsEnv, assets)
			t.Setenv(BinDirEnv, "")
			t.Chdir(t.TempDir()) // no module, so no bin/
			want := tc.setup(t, assets, setupEnvtestStore())
			got, err := resolveBinDir("", NewestMinor, names)
			switch {
			case want == "" && !errors.Is(err, ErrBinariesMissing):
				t.Fatalf("resolveBinDir = %q, %v; want ErrBinariesMissing", got, err)
			case want == "":
				for _, w := range []string{assets, "go tool bindkit controlplane", "KUBEBUILDER_ASSETS"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error does not say %q: %v", w, err)
					}
				}
			case err != nil || got != want:
				t.Errorf("resolveBinDir = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestExistingBinaryDirsHasTheModulesBin: the bin/ of the module the
// process runs in (a test: its package's module) is looked in, after
// $KUBEBUILDER_ASSETS, and its bin/k8s versions (setup-envtest --bin-dir).
func TestExistingBinaryDirsHasTheModulesBin(t *testing.T) {
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(mod, "apis", "v1")
	for _, d := range []string{pkg, filepath.Join(mod, "bin", "k8s", "1.37.0-linux-amd64")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(KubebuilderAssetsEnv, "/assets")
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Chdir(pkg)
	got := ExistingBinaryDirs()
	want := []string{"/assets", filepath.Join(mod, "bin"), filepath.Join(mod, "bin", "k8s", "1.37.0-linux-amd64")}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ExistingBinaryDirs = %q, want %q", got, want)
	}
}
