// Package testenv runs a real etcd and kube-apiserver on 127.0.0.1, and
// kube-controller-manager when asked, for bindkit's integration tests, its
// demo and its benchmarks.
//
// The binaries are built from the Go module proxy by the tools modules in
// hack/tools (`make tools`) into the repository's bin/ folder: the newest
// supported Kubernetes minor in bin/ itself, the older one in bin/v1.36/.
// BINDKIT_BIN_DIR points elsewhere; BINDKIT_KUBE_MINOR=1.36 (or
// Options.KubeMinor) runs the older minor, and Start fails if the
// kube-apiserver it finds reports another. Start launches the processes in a
// temporary directory with their own certificates, a service-account key, an
// admin bearer token and RBAC authorization, waits for /readyz and returns an
// Environment whose Config reaches the kube-apiserver as a member of
// system:masters. Stop ends every process and removes every file Start
// created.
//
// With Options.ControllerManager, kube-controller-manager runs the garbage
// collector and the namespace controller (Options.Controllers picks others),
// so owner references, foreground deletion and namespace deletion behave as
// in a cluster. The ServiceAccount admission plugin stays off either way, so
// a Pod can be created the moment its namespace exists.
//
// A test package shares one control plane through Shared, started lazily by
// the first test that asks for it and stopped at the end of TestMain:
//
//	var controlPlane testenv.Shared
//
//	func TestMain(m *testing.M) { controlPlane.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := controlPlane.Env(t)
//		...
//	}
//
// When the binaries are missing, Env skips the test with a message that says
// how to build them, except under CI=true, where it fails the test: an
// integration test never passes by not running.
package testenv
