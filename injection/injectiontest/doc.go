// Package injectiontest builds an injection context over fake clients, so a
// controller constructor and its reconciler can be unit-tested without a
// cluster.
//
// NewContext seeds a fake kube clientset (k8s.io/client-go/kubernetes/fake)
// and a fake dynamic client (k8s.io/client-go/dynamic/fake) with the given
// objects, adds a fake RESTMapper that knows the built-in kinds bindkit's
// tests use and any custom resources the test declares, and puts all of them
// in a context through injection.NewWithClients. The informers stop, and
// their goroutines are waited for, when the test ends.
//
// The two fake clients do not share storage: an object the test creates
// through one is not seen by the other. NewContext seeds objects of built-in
// kinds into both, and custom resources into the dynamic client only.
package injectiontest
