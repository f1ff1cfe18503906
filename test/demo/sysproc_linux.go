package demo

import "syscall"

// sysProcAttr kills the controller when the process that started it dies
// (a test timeout skips Stop), as testenv does for the control plane.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
