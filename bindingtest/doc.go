// Package bindingtest tests a Binding kind from its author's module, at
// three levels:
//
//   - CheckContract checks Do and Undo alone, on a workload of every shape
//     bindkit binds (Subjects: Deployment, StatefulSet, DaemonSet,
//     ReplicaSet, Job, CronJob, Pod and a custom resource), each in three
//     more layouts (a bare pod template; a crowded one with the user's own
//     entries named like the Binding's, a native sidecar and a third
//     container; a bound one its owner edited), through the same
//     conversions and JSON patches the framework applies, each call on a
//     fresh copy of the Binding: Do and Undo leave their Binding alone, Do
//     is deterministic (also a second later: no clock), does not panic, keeps
//     what the workload has, mounts only volumes the pod has, reaches every
//     container it promises (ContractOptions.Reach) and is idempotent; Undo
//     leaves an unbound subject alone and restores a bound one; fields Go's
//     types do not know survive. With ContractOptions.ControlPlane (or
//     Env), also on subjects as a real kube-apiserver stores them, its
//     defaults filled in, in a subtest skipped, saying what it skips, when
//     the binaries are missing. Each broken promise is one failure at the
//     caller's line, naming the call that broke it, the fields by name and
//     the fix. The subjects' containers and volumes are named with
//     KitNamePrefix, so they never share a name with the Binding's own.
//   - Bindings (NewBindings) creates, edits and deletes Bindings of one
//     kind on a control plane in one line each, and CheckValid asks the
//     kube-apiserver whether a Binding is valid.
//   - NewController runs the kind's controller over the injection fakes
//     (package injectiontest), for table-driven reconciler tests: seed
//     objects, Reconcile a Binding, Get what it wrote.
//   - Run runs the kind's controller and webhook in the test's process,
//     under sharedmain.Run as a binary's main runs them, against a real
//     etcd and kube-apiserver from package envtest, which call the webhook
//     over TLS.
//
// A real-apiserver test, whole:
//
//	var controlPlane = envtest.Shared{Options: envtest.Options{
//		CRDPaths: []string{"../../config/300-envbinding.yaml"},
//	}}
//
//	func TestMain(m *testing.M) { controlPlane.Main(m) }
//
//	func TestEnvBinding(t *testing.T) {
//		env := controlPlane.Env(t)
//		binding, err := wiring.New[v1alpha1.EnvBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
//		if err != nil {
//			t.Fatal(err)
//		}
//		bindingtest.Run(t, env, bindingtest.RunOptions{Bindings: []*wiring.Kind{binding}})
//		ns := env.CreateNamespace(t, "test-")
//		// create a Deployment and an EnvBinding in ns, wait until it is bound
//	}
package bindingtest
