// Package testenv is package envtest as bindkit's own tests use it: the
// same control plane, with the binaries taken by default from bin/ of the
// bindkit repository (found above the working directory, where `make
// tools` builds them) instead of the user cache directory, so `go test
// ./...` in a checkout runs against what `make tools` built.
// BINDKIT_BIN_DIR and Options.BinDir still take precedence.
//
// Its names are envtest's (aliases and thin wrappers); see package envtest
// for the documentation. The Makefile runs the tests of every package that
// imports this one, envtest or bindingtest against each supported minor.
package testenv
