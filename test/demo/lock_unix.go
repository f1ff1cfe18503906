//go:build unix

package demo

import (
	"os"
	"syscall"
)

// lockExclusive blocks until this process holds an exclusive lock on f,
// which closing f releases.
func lockExclusive(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
