// Package authority tests that a Binding carries its author's authority
// and no more, as users meet it: the example binaries with their default
// flags, and the same kinds with no bindkit process running, on a control
// plane with RBAC enforced and running pods, writing Bindings as
// impersonated users with fewer rights than bindkit's controller.
package authority
