package envtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane binary running with its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited and been reaped
	waitErr error         // valid once done is closed
}

// startProcess runs binary with args, sending stdout and stderr to
// dir/<name>.log.
func startProcess(name, binary string, args []string, dir string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: create log file: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, binary, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the operating-system process ID.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exitedError returns a non-nil error, quoting the log, if the process has
// already exited.
func (p *process) exitedError() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, p.logTail(logTailLines))
	default:
		return nil
	}
}

// stop asks the process to end with SIGTERM, and kills it if it is still
// running after grace. It returns once the process has been reaped.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: send SIGTERM: %w", p.name, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: kill after %v: %w", p.name, grace, err)
	}
	<-p.done
	return nil
}

// logTailLines is how much of a failing process's log an error quotes.
const logTailLines = 30

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return tail(data, n)
}

// tail returns the last n lines of data, without a trailing newline.
func tail(data []byte, n int) string {
	data = bytes.TrimRight(data, "\n")
	for i, cut := len(data)-1, 0; i >= 0; i-- {
		if data[i] == '\n' {
			cut++
			if cut == n {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
