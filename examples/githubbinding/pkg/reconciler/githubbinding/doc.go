// Package githubbinding runs GithubBindings: NewController binds the
// workloads that already exist, NewWebhook binds them as they are created
// or updated. Both are sharedmain constructors, wired only from what the
// injection context carries, so cmd/controller's main is one line and a
// test builds them over fakes (see injectiontest).
//
// This is the package to copy for a Binding of your own: change the API
// import, the names and, if your Binding needs them, BaseReconciler's
// WithContext and SubResourcesReconciler (examples/configbinding shows
// both).
package githubbinding
