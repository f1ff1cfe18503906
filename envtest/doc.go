// Package envtest runs a real etcd and kube-apiserver on 127.0.0.1, and
// kube-controller-manager when asked, for the tests of a Binding's author,
// bindkit's own integration tests, its demo and its benchmarks.
//
// # The binaries
//
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler come
// from one command run in a module that lists bindkit as a tool (as one
// `bindkit new` makes does; elsewhere `go run
// github.com/bindkit/bindkit/cmd/bindkit controlplane` is the same):
//
//	go tool bindkit controlplane
//
// It puts the newest supported minor (-minor 1.36 for another, -minor all
// for every one of Releases) into the user cache directory (CacheDir, e.g.
// ~/.cache/bindkit/controlplane/kubernetes-v1.37.2-etcd-v3.7.3 on Linux):
// binaries of that minor already on the machine (ExistingBinaryDirs:
// $KUBEBUILDER_ASSETS, the module's bin/, setup-envtest's directory, where
// controller-runtime's etcd and kube-apiserver are) are used after a
// version check and named; the rest is built from the Go module proxy with
// progress output and an estimate of how long it takes. It returns at once
// when the binaries are there.
//
// Start looks where that command does, and takes the first directory that
// holds every binary it needs, of the minor: the CacheDir, then
// ExistingBinaryDirs (each binary's --version checked), so binaries already
// on the machine need no command at all. BINDKIT_BIN_DIR (or
// Options.BinDir) names the one directory instead, with the newest minor's
// binaries and a subdirectory per older minor (v1.36): bindkit's repository
// builds its bin/ that way with `make tools`. BINDKIT_KUBE_MINOR=1.36 (or
// Options.KubeMinor) runs the older minor, and Start fails if the
// kube-apiserver it finds reports another.
//
// # The control plane
//
// Start launches the processes in a temporary directory with their own
// certificates, a service-account key, an admin bearer token and RBAC
// authorization, installs Options.CRDPaths, waits for /readyz and the
// CRDs, and returns an Environment whose Config reaches the kube-apiserver
// as a member of system:masters. Stop ends every process and removes every
// file Start created.
//
// With Options.ControllerManager, kube-controller-manager runs the garbage
// collector and the namespace controller (Options.Controllers picks others),
// so owner references, foreground deletion and namespace deletion behave as
// in a cluster. The ServiceAccount admission plugin stays off either way, so
// a Pod can be created the moment its namespace exists. The kube-apiserver
// calls webhooks as in a cluster, over TLS; package bindingtest runs a
// Binding's controller and webhook in the test process against it.
//
// # Workloads
//
// With Options.Workloads, pods run as in a cluster, without containers:
// kube-controller-manager also runs the Deployment, ReplicaSet,
// StatefulSet, DaemonSet, Job and CronJob controllers (WorkloadControllers),
// kube-scheduler binds pods to Options.Nodes fake nodes (two by default),
// and kwok (sigs.k8s.io/kwok, version Kwok) plays their kubelet: nodes
// become Ready, pods Running and Ready, Jobs' pods Succeeded, deleted pods
// go away. Workload status (observedGeneration, updatedReplicas,
// availableReplicas, conditions) moves as in a cluster, so a test can wait
// for a rollout and look at the pods it made. To see what a broken Binding
// does, make a pod fail on purpose: a pod (or pod template) with the
// FailPodAnnotation, or with a container of FailingImage (say a sidecar the
// Binding injects), runs but never becomes Ready, its containers waiting
// in CrashLoopBackOff. The kwok stages that do this are shipped in the
// package (kwok/stages.yaml). Workloads adds about half a second to Start
// (3.4 s against 2.8 s for etcd and kube-apiserver alone, 1.37, 2 cores).
//
// kwok is one binary for every minor: Start looks for it beside the
// minor's binaries, then in BinDir itself. bindkit's `make tools` builds it
// into bin/, and `go tool bindkit controlplane` beside the binaries it
// puts in the cache; to build it alone into DIR, the directory of the
// newest minor's binaries:
//
//	GOBIN=DIR go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0
//
// A test package shares one control plane through Shared, started lazily by
// the first test that asks for it and stopped at the end of TestMain:
//
//	var controlPlane = envtest.Shared{Options: envtest.Options{
//		CRDPaths: []string{"../../config/300-envbinding.yaml"},
//	}}
//
//	func TestMain(m *testing.M) { controlPlane.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := controlPlane.Env(t)
//		...
//	}
//
// controlPlane.Main(m) is envtest.Main(m, &controlPlane); a package with
// several control planes (of two minors, say) calls envtest.Main(m, &a, &b)
// once instead.
//
// When the binaries are missing, Env skips the test with a message that says
// where Start looked and the fastest way to get them, except under
// CI=true, where it fails the test: an integration test never passes by
// not running. Shared.Start returns the error instead, for a test that
// says in its own words what it skips (bindingtest.CheckContract's checks
// on the API server).
//
// # Ports
//
// None of the control plane's binaries can bind port 0 and report the
// port it got, so Start chooses free ports of 127.0.0.1 for them. When
// another process takes one between the choice and the bind (a process
// binding port 0, or a connection's local port, can get the same one),
// the binary fails with "address already in use"; Start then starts that
// binary again on new ports, up to five times, so a busy machine never
// fails a start that way. The servers a test starts beside the control
// plane should bind port 0 and report what they got, as bindkit's
// processes do (injection/sharedmain's --listen-addresses-file), rather
// than take a port from FreePort.
//
// # A control plane that keeps running
//
// Starting the control plane takes seconds per test binary. To run one
// package's tests again and again, start one that keeps running and point
// Shared at it: Environment.Describe writes what reaches it to a file, and
// with ControlPlaneEnv (BINDKIT_CONTROL_PLANE) naming that file, Shared.Env
// attaches to it (Attach) instead of starting one, after checking that it
// runs what the package's Options ask for. bindkit's repository runs one
// with `make controlplane`. Tests attached to one control plane share it,
// so what a test leaves behind (a cluster-scoped object, a fixed name)
// meets the next run; tests that clean up as in a cluster do not notice.
package envtest
