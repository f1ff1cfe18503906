// Package bench holds bindkit's benchmarks against its floors and its
// peers: the example controller binary, run with default flags against a
// real kube-apiserver, against a plain client-go loop sending the same
// patches (BenchmarkBind); the shared subject cache against client-go's
// typed informer (BenchmarkSubjectCache10000); the webhook's round trip
// against a bare TLS server and controller-runtime's webhook server
// (BenchmarkRoundTrip); and the admission decision against knative.dev/pkg's
// psbinding (BenchmarkAdmit); a Deployment's create and update latency at
// the kube-apiserver with no webhook, the example binary's and
// controller-runtime's (BenchmarkAdmissionLatency); and many namespaces of
// one selector Binding and 3 Deployments each through the example binary
// against a client-go floor of the same writes (BenchmarkManyBindings); and,
// opt-in only (BINDKIT_BENCH_SCALE=<n>, never run by `make bench` or CI),
// n Deployments over n/100 namespaces with 4 Bindings each bound through
// the example binary against the same floor, the admission index's rebuild
// after one Binding edit and a create's latency with and without bindkit
// (BenchmarkScale, issue 40's 50,000 Deployments). It is a module of its
// own so that the framework module never depends on knative or
// controller-runtime: only these benchmarks do. Run them with `make bench` from the repository root;
// RESULTS.md records the runs.
//
// cmd/ holds the two programs the process benchmarks build besides the
// example controller: the same controller main with a CPU profile toggled
// by a signal, and a process that holds client-go's typed Deployment
// informer and nothing else.
package bench
