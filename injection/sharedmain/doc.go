// Package sharedmain runs several controllers and bindkit's admission
// webhook in one process. It is the one place flags, clients, leader
// election, certificates, probes, metrics and shutdown are set up, so a
// binary's main is one call.
//
// A binary's main lists its controller constructors and nothing else:
//
//	func main() {
//		sharedmain.Main("bindings-controller", NewController, NewAdmissionController)
//	}
//
// Main parses the command line with a flag set of its own (ParseFlags:
// --kubeconfig, --server, --disable-ha, --webhook-address, --webhook-port,
// --webhook-ip-sans, --webhook-grace-period, --probe-port, the certificate
// lifetimes --webhook-ca-validity, --webhook-ca-rotate-before,
// --webhook-cert-validity and --webhook-cert-rotate-before,
// --webhook-kube-namespaces, the bounds on what the webhook reads
// (--webhook-read-timeout, --webhook-handshake-timeout,
// --webhook-read-header-timeout, --webhook-min-body-rate,
// --webhook-max-connections, --webhook-max-connections-per-peer,
// --webhook-max-in-flight, --webhook-max-in-flight-memory,
// --webhook-max-request-body-bytes, --webhook-max-object-depth,
// --webhook-max-containers, --webhook-max-volumes, --webhook-max-env,
// --webhook-max-volume-mounts, --webhook-max-patch-bytes), its optional
// client authentication (--webhook-client-ca), --kube-api-qps,
// --kube-api-burst, --resync-period, --uninstall, which removes what
// bindkit did instead of running the controllers, --declarative-admission
// (whether declarative Binding kinds are admitted by a
// MutatingAdmissionPolicy, "policy", the default, or by the webhook),
// --metrics-address, --metrics-secure, --metrics-cert-dir and
// --listen-addresses-file;
// each is a field of Flags; --version prints the module version and VCS
// revision the binary was built from, ReadBuildInfo, and exits 0), stops
// on SIGINT or SIGTERM
// and exits with a status that says how it ended. MainWithContext, shaped
// like knative's, takes its settings from the context (WithFlags,
// WithLogLevel, WithLogOutput), returns when the context ends and exits 1
// when the process fails, so a caller that ignores it still ends with the
// right status. Run does the same work and returns the error instead, for
// tests.
//
// # Listeners
//
// The process listens on up to three TCP addresses: the webhook's
// (--webhook-address, --webhook-port), the probes' (--probe-port: when
// there is no webhook, or beside one that requires client certificates)
// and the metrics' (--metrics-address, HTTPS unless --metrics-secure=false). Each accepts port 0, for a port
// the kernel picks (AnyPort in Flags), so tests and tools running several
// processes side by side never pick a "free" port another process can
// take before it is bound. Once every listener is bound, and before the
// caches sync, the process logs where ("listening") and writes the same,
// as JSON, to --listen-addresses-file (ListenAddresses,
// WaitListenAddresses): a caller reads the webhook's port there and points
// the webhook configuration's URL at it.
//
// # API clients
//
// Each client the process builds is rate-limited to --kube-api-qps
// requests a second with bursts of --kube-api-burst (DefaultKubeAPIQPS and
// DefaultKubeAPIBurst say why these defaults): high enough that binding
// thousands of subjects is never slowed, finite so that a runaway loop is
// capped. Informers replay every object every --resync-period
// (DefaultResyncPeriod), which heals any missed event.
//
// # What runs
//
// Before it calls the constructors, MainWithContext stores the one
// description of the webhook in the context (webhook.WithOptions): the
// certificates Secret and its keys, the Service, and whether the webhook
// may be called in the kube namespaces. The server, the certificates
// reconciler and every admission controller (psbinding's reads it with
// webhook.GetOptions) take it from there, so they cannot disagree.
//
// Every Impl a constructor returns runs WorkersPerController workers. An
// Impl whose Reconciler implements webhook.Admitter is also
// routed by the webhook server, by its Path; when there is at least one,
// the process keeps the webhook's certificates Secret
// (webhook.DefaultSecretName in the system namespace, named for the Service
// webhook.DefaultServiceName plus --webhook-ip-sans) with package
// certificates (the admission controllers that publish the CA bundle,
// certificates.Publisher, are the ones it waits for before signing under a
// new CA), and serves HTTPS with /healthz and /readyz. Without a
// webhook, the probes are served over HTTP on --probe-port, /readyz
// answering 200 once the informers have synced.
//
// # Leader election
//
// Replicas compete for a coordination.k8s.io/v1 Lease named after the
// component in the system namespace; the winner's Impls are promoted
// (controller.Impl.Promote). Only the leader writes the certificates
// Secret; the others serve from it through their informer. --disable-ha
// skips the election and promotes everything at once, for a single replica.
//
// # Logging
//
// The process logs JSON with zap through the logger in the context
// (controller/logging). Its level is the key loglevel.<component> of the
// ConfigMap config-logging in the system namespace, info when either is
// missing, and follows changes to it at run time.
//
// client-go's own lines (klog: leader election, reflectors, client-side
// throttling) are routed into the same log, as zap entries named "klog"
// with their key-value pairs as fields: klog's V(0) at info, V(1) to V(4)
// at debug; more detailed levels, where client-go logs request URLs,
// headers and bodies, never. Objects in its fields appear as
// namespace/name, never whole. A warning the kube-apiserver sends with a
// response (a deprecated field, a sidecar repeating the app's container
// port) is logged at warn the first time its text comes, not at every
// write: subjects that share a flaw would otherwise log it at every patch.
//
// # Metrics
//
// Every replica serves Prometheus metrics at /metrics on
// --metrics-address (DefaultMetricsAddress, ":9090"; empty turns it off):
// admissions by path, operation, outcome and dry run, with their duration
// and patch size; reconciles by controller and outcome, with their
// duration; each controller's work queue (depth, adds, latency, work
// duration, retries); client-go's request latency, results and
// rate-limiter waits; subject patches, conflicts and subjects bound by
// Binding resource; the certificates' expiry and rotations; leadership per
// controller; Bindings in each admission index; and the Go runtime's and
// the process's. Package metrics defines them (metrics.Families) and the
// operator's guide (docs/operators-guide.md) lists them. The registry is
// the process's own, never the global one; WithMetricsRegistry hands Run
// one to use instead.
//
// They are served over HTTPS, and only to a caller whose bearer token the
// kube-apiserver authenticates (a TokenReview) as a user it authorizes to
// get the non-resource URL /metrics (a SubjectAccessReview), as
// kubebuilder's projects do: a scrape without a valid token is answered
// 401, one of a user without the grant 403. The process needs create on
// tokenreviews.authentication.k8s.io and
// subjectaccessreviews.authorization.k8s.io; a scraper needs a role with
// get on /metrics (config/'s metrics-reader ClusterRole). An answer is
// kept for DefaultMetricsAllowTTL (DefaultMetricsDenyTTL for a refusal),
// so a scraper costs two reviews a minute, not two a scrape; only tokens
// the kube-apiserver authenticated are kept (at most
// DefaultMetricsAuthCacheSize), and reviews of tokens not kept are
// bounded (DefaultMetricsReviewsPerSecond, DefaultMetricsReviewBurst,
// DefaultMetricsReviewsInFlight; 429 beyond), so a caller with made-up
// tokens costs the kube-apiserver at most those reviews and the process
// no memory. So are connections, headers and the handshake's time. The
// certificate is the one in --metrics-cert-dir (tls.crt and tls.key,
// read again when they change), or else a self-signed one the process
// generates at start, which a scraper does not verify.
// --metrics-secure=false serves them over plain HTTP to anyone who
// reaches the address, unauthenticated, and logs a warning saying so.
//
// client-go's request metrics and klog's logger are hooks client-go and
// klog accept once per process, and read without a lock on every request.
// Run installs them (InstallProcessHooks) before it makes a client, and
// points them at itself while it runs; a test binary that runs a second
// process, after the first or beside it, gets them for the latest one,
// and the earlier one gets them back when the latest returns. A program
// whose own clients work before or while Run starts (a test polling the
// API server while Run starts) calls InstallProcessHooks first.
//
// # Ownership
//
// Every write the framework makes names the component as its field
// manager, so managedFields say which controller set what: subject
// patches, Binding finalizers, annotations and status (through the
// reconcile context, controller.WithFieldManager), the webhook
// configuration, and the certificates Secret. The clients' user agent
// starts with the component too, so the writes client-go makes itself
// (the leader election Lease, Events) are attributed to it as well.
//
// Nothing here is global but the two hooks above: no flag.CommandLine,
// no init registration.
package sharedmain
