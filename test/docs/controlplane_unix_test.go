//go:build unix

package docs

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"time"
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
			ready = strings.Contains(l, "export KUBECONFIG=")
		case <-timeout:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("%s: not ready within 10 minutes:\n%s", strings.Join(command, " "), strings.Join(seen, "\n"))
		}
	}
	t.Logf("%s is ready; Ctrl-C", strings.Join(command, " "))
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s after Ctrl-C: %v\n%s", strings.Join(command, " "), err, strings.Join(seen, "\n"))
		}
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Errorf("%s did not stop within a minute of Ctrl-C", strings.Join(command, " "))
	}
}
