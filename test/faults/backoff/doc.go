// Package backoff holds the slowest fault test apart, so that it overlaps
// the others: a Binding whose subject cannot be patched for longer than
// any retry budget still recovers once the cause is gone. Most of its
// minutes are spent waiting, not computing.
package backoff
