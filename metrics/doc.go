// Package metrics is bindkit's Prometheus instrumentation: the metric
// families an operator sees (Families, and the table of
// docs/operators-guide.md built from it), and the observers the
// framework's parts report to.
//
// Nothing is registered globally. New registers every family in the
// registry it is given (NewRegistry adds the Go runtime's and the
// process's collectors to a new one), and injection/sharedmain serves
// that registry on --metrics-address. The parts are wired explicitly:
//
//   - Admission is the webhook.Observer of the webhook server (requests
//     by path, operation, outcome and dry run; latency; patch size);
//   - Controllers is the controller.Observer Impls run with (reconciles
//     by outcome and their duration, and each work queue's metrics
//     through client-go's workqueue.MetricsProvider), and the
//     psbinding.Observer their BaseReconcilers report subjects to;
//   - Certificates is the certificates.Observer of the certificates
//     reconciler (expiry times, rotations);
//   - WatchLeaders and WatchIndexes read leadership and the admission
//     indexes' sizes when scraped;
//   - AttachClientGo routes client-go's request hooks, which client-go
//     accepts once per process, to these Metrics while attached.
//
// Labels are bounded: webhook paths, controller names, Binding resources,
// operations, outcomes and HTTP codes; never an object's name. Every
// method is safe for concurrent use, and the admission observer adds no
// allocation to the request path.
package metrics
