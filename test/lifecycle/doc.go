// Package lifecycle holds the tests of a Binding's whole life on a control
// plane that runs kube-controller-manager (its garbage collector and
// namespace controller), with the githubbinding example binary as users
// run it: a namespace holding Bindings and bound subjects is deleted and
// disappears, and removing bindkit (the binary's --uninstall, then the
// installation) leaves no Binding, finalizer or bound subject behind.
package lifecycle
