//go:build !linux

package demo

import "syscall"

// sysProcAttr has nothing to add where the kernel cannot tie a child's
// life to its parent's; Stop still ends the controller.
func sysProcAttr() *syscall.SysProcAttr { return nil }
