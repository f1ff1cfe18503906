package testenv_test

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

	"github.com/bindkit/bindkit/internal/testenv"
)

// TestStartStopWithRealControlPlaneLeavesNothingBehind starts a second,
// private control plane and checks that Stop ends both processes, frees the
// ports and removes the directory.
func TestStartStopWithRealControlPlaneLeavesNothingBehind(t *testing.T) {
	controlPlane.Env(t) // skip or fail exactly as the shared control plane would

	env, err := testenv.Start(context.Background(), testenv.Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pids := env.PIDs()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("process %d not running after Start: %v", pid, err)
		}
	}
	for _, name := range []string{"kubeconfig", "etcd.log", "kube-apiserver.log"} {
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
}

func TestStartReportsMissingBinaries(t *testing.T) {
	_, err := testenv.Start(context.Background(), testenv.Options{BinDir: t.TempDir()})
	if !errors.Is(err, testenv.ErrBinariesMissing) {
		t.Fatalf("Start with an empty bin dir: err = %v, want ErrBinariesMissing", err)
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

			_, err := testenv.Start(context.Background(), testenv.Options{BinDir: bin})
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
	env, err := testenv.Start(context.Background(), testenv.Options{})
	if err != nil {
		fmt.Println("no control plane:", err)
		return
	}
	defer env.Stop()
	fmt.Println("kube-apiserver at", env.Config.Host)
}
