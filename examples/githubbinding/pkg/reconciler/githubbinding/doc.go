// Package githubbinding runs GithubBindings: New wires the kind with one
// call to package wiring, which returns the controller that binds the
// workloads that already exist and the webhook that binds them as they are
// created or updated. Both are sharedmain constructors, wired only from
// what the injection context carries, so cmd/controller's main is a few
// lines and a test builds them over fakes (see injectiontest and
// bindingtest).
//
// For a Binding of your own, start from `bindkit new` (cmd/bindkit), which
// writes this package's one call into your main; examples/configbinding
// shows the options a Binding that owns objects beside its subjects uses.
package githubbinding
