//go:build !unix

package main

import "os/exec"

// ownProcessGroup does nothing where there are no process groups:
// cancelling cmd kills its process only.
func ownProcessGroup(cmd *exec.Cmd) {}
