package envtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bindkit/bindkit/envtest"
)

// TestStartStopWithRealControlPlaneLeavesNothingBehind starts a second,
// private control plane, with and without kube-controller-manager (and with
// workloads: kube-scheduler and kwok too), and checks
// that it runs the minor asked for and that Stop ends every process, frees
// the ports and removes the directory.
func TestStartStopWithRealControlPlaneLeavesNothingBehind(t *testing.T) {
	controlPlane.Env(t) // skip or fail exactly as the shared control plane would

	tests := []struct {
		name              string
		controllerManager bool
		workloads         bool
		wantProcesses     int
		wantLogs          []string
	}{{
		name:          "etcd and kube-apiserver",
		wantProcesses: 2,
		wantLogs:      []string{"kubeconfig", "etcd.log", "kube-apiserver.log"},
	}, {
		name:              "with kube-controller-manager",
		controllerManager: true,
		wantProcesses:     3,
		wantLogs:          []string{"kubeconfig", "etcd.log", "kube-apiserver.log", "kube-controller-manager.log"},
	}, {
		name:          "with workloads",
		workloads:     true,
		wantProcesses: 5,
		wantLogs:      []string{"kubeconfig", "etcd.log", "kube-apiserver.log", "kube-controller-manager.log", "kube-scheduler.log", "kwok.log", "kwok.yaml"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := envtest.Start(context.Background(), envtest.Options{ControllerManager: tc.controllerManager, Workloads: tc.workloads})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if got, want := env.KubeMinor(), wantMinor(); got != want {
				t.Errorf("KubeMinor() = %q (%s), want %q", got, env.Version.GitVersion, want)
			}
			pids := env.PIDs()
			if len(pids) != tc.wantProcesses {
				t.Errorf("PIDs() = %v, want %d processes", pids, tc.wantProcesses)
			}
			for _, pid := range pids {
				if err := syscall.Kill(pid, 0); err != nil {
					t.Fatalf("process %d not running after Start: %v", pid, err)
				}
			}
			for _, name := range tc.wantLogs {
				if _, err := os.Stat(filepath.Join(env.Dir, name)); err != nil {
					t.Errorf("after Start: %v", err)
				}
			}
			apiAddr := strings.TrimPrefix(env.Config.Host, "https://")

			if err := env.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			for _, pid := range pids {
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("process %d after Stop: kill(0) = %v, want ESRCH", pid, err)
				}
			}
			if _, err := os.Stat(env.Dir); !os.IsNotExist(err) {
				t.Errorf("directory %s after Stop: stat = %v, want not exist", env.Dir, err)
			}
			if conn, err := net.Dial("tcp", apiAddr); err == nil {
				conn.Close()
				t.Errorf("kube-apiserver address %s still accepts connections after Stop", apiAddr)
			}
			if err := env.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

// wantMinor is the minor Start runs by default in this test process.
func wantMinor() string {
	if minor := os.Getenv(envtest.KubeMinorEnv); minor != "" {
		return minor
	}
	return envtest.NewestMinor
}

func TestStartReportsMissingBinaries(t *testing.T) {
	withoutControllerManager := t.TempDir()
	writeScript(t, filepath.Join(withoutControllerManager, "etcd"), "exit 1")
	writeScript(t, filepath.Join(withoutControllerManager, "kube-apiserver"), "exit 1")
	tests := []struct {
		name string
		opts envtest.Options
		want string // a substring of the error
	}{{
		name: "empty bin dir",
		opts: envtest.Options{BinDir: t.TempDir(), KubeMinor: envtest.NewestMinor},
		want: "etcd",
	}, {
		name: "no binaries of an older minor",
		opts: envtest.Options{BinDir: withoutControllerManager, KubeMinor: "1.30"},
		want: "v1.30/etcd",
	}, {
		name: "kube-controller-manager asked for, not built",
		opts: envtest.Options{BinDir: withoutControllerManager, KubeMinor: envtest.NewestMinor, ControllerManager: true},
		want: "kube-controller-manager",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envtest.Start(context.Background(), tc.opts)
			if !errors.Is(err, envtest.ErrBinariesMissing) {
				t.Fatalf("Start: err = %v, want ErrBinariesMissing", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name %q:\n%v", tc.want, err)
			}
		})
	}
}

func TestStartRejectsMalformedMinor(t *testing.T) {
	for _, minor := range []string{"1", "1.x", "2.0.1", "latest"} {
		_, err := envtest.Start(context.Background(), envtest.Options{BinDir: t.TempDir(), KubeMinor: minor})
		if err == nil || errors.Is(err, envtest.ErrBinariesMissing) || !strings.Contains(err.Error(), minor) {
			t.Errorf("Start with KubeMinor %q: err = %v, want an error naming the malformed minor", minor, err)
		}
	}
}

// TestStartQuotesLogOfFailingProcess runs stand-in binaries that fail, so it
// needs no real control plane.
func TestStartQuotesLogOfFailingProcess(t *testing.T) {
	tests := []struct {
		name      string
		etcd      string // shell script body
		apiserver string
		want      []string // substrings of the error
	}{{
		name:      "etcd exits",
		etcd:      "echo 'first line'; echo 'etcd: bad flag --frobnicate' >&2; exit 3",
		apiserver: "exit 0",
		want:      []string{"etcd exited early", "first line", "etcd: bad flag --frobnicate"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			writeScript(t, filepath.Join(bin, "etcd"), tc.etcd)
			writeScript(t, filepath.Join(bin, "kube-apiserver"), tc.apiserver)
			// A private TMPDIR: other packages start control planes in parallel.
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)

			_, err := envtest.Start(context.Background(), envtest.Options{BinDir: bin, KubeMinor: envtest.NewestMinor})
			if err == nil {
				t.Fatal("Start succeeded with failing binaries")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("failed Start left %d entries in TMPDIR, first %q", len(left), left[0].Name())
			}
		})
	}
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func ExampleStart() {
	env, err := envtest.Start(context.Background(), envtest.Options{})
	if err != nil {
		fmt.Println("no control plane:", err)
		return
	}
	defer env.Stop()
	fmt.Println("kube-apiserver at", env.Config.Host)
}
