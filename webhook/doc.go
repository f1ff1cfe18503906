// Package webhook is bindkit's HTTPS admission webhook server. It bounds
// everything an admission request can cost before anything is decoded, so
// no peer, fast or hostile, takes the process or the kube-apiserver down.
//
// A Server routes AdmissionReviews to AdmissionControllers by URL path. It
// owns everything around the decision: it accepts admission.k8s.io/v1 and
// v1beta1 reviews as application/json, bounds the body
// (Options.MaxRequestBodyBytes, 413 beyond it), decodes it as the
// kube-apiserver does (field names match case-sensitively; the request's
// Object, OldObject and Options are its JSON as it arrived, not copied
// out of the body), rejects
// malformed input with a 4xx that says what was wrong, echoes the request
// UID, recovers from a controller's panic (500, logged with its stack; the
// server keeps serving), and passes the request's deadline and dry-run flag
// (IsDryRun) in the context. Allowed, Denied, Errored and PatchResponse build the decision.
//
// Everything a request can make the server hold is bounded, so that
// anyone who reaches the port cannot grow the process without limit
// (defaults in DefaultOptions and DefaultObjectLimits): the connections
// open at once, in all and from one address (MaxConnections,
// MaxConnectionsPerPeer), the time each stage of a request may take
// (HandshakeTimeout, ReadHeaderTimeout, then a body's pace, MinBodyRate,
// and ReadTimeout, shortened by the request's ?timeout=; 408 beyond it),
// the admissions in flight
// (MaxAdmissionsInFlight) and their estimated memory (MaxInFlightMemory).
// Each request reserves twice its body's length from that memory budget
// before reading it, and a controller reserves what it is about to decode
// (Reserve). Overload is answered at once, never queued: HTTP 429 with
// Retry-After and a message naming the limit, which the kube-apiserver
// retries within its timeout. The ObjectLimits (nesting depth, containers,
// volumes, env and volumeMounts per container, patch size) reach
// controllers through the request's context (ObjectLimitsFrom).
//
// Slow peers never crowd out the kube-apiserver: a new connection is
// always accepted at once, and at a cap a connection is closed for it:
// the one in a stage of a request (handshake, headers, body) whose
// deadline is nearest, unless it entered that stage within the last
// second while a kept-alive connection has sat idle for a second, which
// then goes instead (the one idle longest). A peer stalling at any stage
// is cut first; the kube-apiserver, which sends its requests at once and
// reuses the connection it used last, loses only connections it holds
// spare, or those of the clients it dropped when the caBundle changed; a
// connection deciding an admission is never cut. An address that has not proven itself (sent
// an admission, or with ClientCAFile completed a handshake, since the
// server started) and already holds connections gets no such
// displacement: at a cap, or while its handshakes fail, its new
// connection is reset before any TLS, so that a flood's reconnections do
// not each cost a handshake.
//
// With ClientCAFile set, only callers presenting a client certificate
// signed by a CA in that file complete the TLS handshake; the
// kube-apiserver presents one when its AdmissionConfiguration gives it a
// kubeconfig for the webhook. At a cap, every connection still in its
// handshake is then closed before any authenticated one. ProbeHandler
// then serves the probes on a port of their own, since a kubelet's probe
// has no certificate.
//
// The serving certificate is read from a Secret through a SecretGetter (a
// client-go lister) on each TLS handshake and parsed once per
// resourceVersion, so a certificate rotated by package certificates is
// served without a restart. TLS 1.3 is the default minimum and HTTP/2 is off
// unless enabled.
//
// /healthz answers 200 while the process serves. /readyz answers 200 only
// when every controller that implements Syncer has synced, none that
// implements Checker reports a fault, a valid certificate is available,
// and the server is not shutting down. An
// admission that arrives before its controller has synced waits for it, up
// to Options.ReadinessTimeout, then fails with 503 so the kube-apiserver
// applies the webhook's failurePolicy.
//
// When Serve's context ends the server turns unready, keeps serving for
// Options.GracePeriod while callers move away, then drains requests in
// flight and returns.
//
// Requests are logged at debug level with kind, namespace, name, operation
// and latency; objects and keys are never logged.
package webhook
