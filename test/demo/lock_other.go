//go:build !unix

package demo

import (
	"errors"
	"os"
)

// lockExclusive cannot lock a file here: BuildPackage builds every time.
func lockExclusive(*os.File) error { return errors.ErrUnsupported }
