// Command demo runs the githubbinding walkthrough on a local control plane:
// `make demo` from the repository root. It prints each step and exits 0 on
// success, 1 with the failing step on failure.
package main
