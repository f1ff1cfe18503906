// Package demo is the githubbinding walkthrough run end to end on a real
// control plane: the README's demo command runs it, and its test runs it
// under `make test`, so the newcomer's first command is always known to
// work.
//
// It builds the githubbinding controller and runs it as a separate process
// (webhook on 127.0.0.1, reached by the kube-apiserver through a URL client
// config), creates a Deployment and a GithubBinding, shows the secret volume
// and mounts appear through the reconciler and at admission, deletes the
// Binding, shows them go, and stops the controller with SIGTERM, checking
// that it exits cleanly.
package demo
