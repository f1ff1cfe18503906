// Package bench holds side-by-side benchmarks of bindkit against
// knative.dev/pkg's psbinding and controller-runtime's webhook server. It is
// a module of its own so that the framework module never depends on either:
// only these benchmarks do. Run them with `make bench` from the repository
// root; RESULTS.md records a run.
package bench
