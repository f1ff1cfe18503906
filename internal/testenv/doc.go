// Package testenv runs a real etcd and kube-apiserver on 127.0.0.1 for
// bindkit's integration tests, its demo and its benchmarks.
//
// The binaries are built from the Go module proxy by the tools module in
// hack/tools (`make tools`) into the repository's bin/ folder; BINDKIT_BIN_DIR
// points elsewhere. Start launches both processes in a temporary directory
// with their own certificates, a service-account key, an admin bearer token
// and RBAC authorization, waits for /readyz and returns an Environment whose
// Config reaches the kube-apiserver as a member of system:masters. Stop ends
// both processes and removes every file Start created.
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
