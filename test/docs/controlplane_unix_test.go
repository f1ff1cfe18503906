//go:build unix

package docs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// runUntilReady runs `go tool bindkit controlplane -run ...` (which runs
// until interrupted) as an author does: until it prints how to run the
// controller against the control plane it started, then Ctrl-C, which
// must stop it, and everything it started, within a minute.
func (s *session) runUntilReady(env []string, command []string) {
	t := s.t
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Dir, cmd.Env = s.cwd, env
	// Its own process group, so Ctrl-C reaches the go command and the
	// program it runs, as a terminal's does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	ready := false
	timeout := time.After(10 * time.Minute)
	for !ready {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("%s ended before it was ready:\n%s", strings.Join(command, " "), strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			ready = strings.Contains(l, " go run ./cmd/controller ") // printed after the kubeconfig
		case <-timeout:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("%s: not ready within 10 minutes:\n%s", strings.Join(command, " "), strings.Join(seen, "\n"))
		}
	}
	t.Logf("%s is ready", strings.Join(command, " "))
	s.runPrintedController(seen)
	t.Logf("Ctrl-C: %s", strings.Join(command, " "))
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() {
		for l := range lines {
			seen = append(seen, l)
		}
		done <- cmd.Wait()
	}()
	select {
	case <-done:
		// The go command exits 1 when interrupted, whatever the program
		// it runs does: what the program says is what counts.
		if out := strings.Join(seen, "\n"); !strings.Contains(out, "==> stopping the control plane") || strings.Contains(out, "stop: ") {
			t.Errorf("%s after Ctrl-C: did not stop cleanly:\n%s", strings.Join(command, " "), out)
		}
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Errorf("%s did not stop within a minute of Ctrl-C", strings.Join(command, " "))
	}
}

// runPrintedController runs, in the session's module, the controller as
// `controlplane -run` printed it (lines), when the module has one, and
// waits until it has written its CA bundle into its webhook
// configuration: it runs against the control plane, leads, and the
// kube-apiserver can call its webhook on 127.0.0.1. Then Ctrl-C.
func (s *session) runPrintedController(printed []string) {
	t := s.t
	if _, err := os.Stat(filepath.Join(s.cwd, "cmd", "controller")); err != nil {
		t.Logf("no ./cmd/controller here to run as printed")
		return
	}
	var kubeconfig string
	var fields []string
	for _, l := range printed {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "export KUBECONFIG="); ok {
			kubeconfig = v
		}
		if strings.Contains(l, " go run ./cmd/controller ") {
			fields = strings.Fields(l)
		}
	}
	if kubeconfig == "" || len(fields) < 4 || !strings.HasPrefix(fields[0], "SYSTEM_NAMESPACE=") {
		t.Fatalf("controlplane -run printed no KUBECONFIG and controller command:\n%s", strings.Join(printed, "\n"))
	}
	cmd := exec.Command(fields[1], fields[2:]...)
	cmd.Dir = s.cwd
	cmd.Env = append(s.environment(), "KUBECONFIG="+kubeconfig, fields[0])
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("controller log:\n%s", log.String())
		}
	}()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range list.Items {
			for _, w := range c.Webhooks {
				if len(w.ClientConfig.CABundle) > 0 {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the controller run as printed did not program its webhook within 10 minutes: %v", err)
	}
	t.Logf("the controller run as printed leads and has programmed its webhook")
}
