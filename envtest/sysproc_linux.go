package envtest

import "syscall"

// sysProcAttr kills a control-plane process when the test binary that started
// it dies (a panic or a test timeout skips Stop), so no stray etcd or
// kube-apiserver outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
