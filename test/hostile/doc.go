// Package hostile holds the tests that attack a running webhook the way
// anyone who can reach its port could: the example githubbinding
// controller, built and started as its own process with default flags
// against the real kube-apiserver, receives malformed and oversized
// bodies, object bombs, slow and unfinished bodies, connection floods and
// concurrent large requests; its metrics endpoint receives floods of
// made-up bearer tokens. The tests read the process's own memory
// (VmHWM in /proc) to hold it to the webhook's stated bound, and check
// that only the kube-apiserver's client certificate gets in when the
// webhook asks for one.
//
// Set BINDKIT_HOSTILE_BINARY to a controller built elsewhere (an older
// commit, say) to measure it instead; BINDKIT_HOSTILE_MEASURE_ONLY=1 then
// reports memory without asserting the bound, and
// BINDKIT_HOSTILE_SCENARIOS, a regular expression, selects scenarios by
// name (an unbounded webhook may need many GiB for some).
package hostile
