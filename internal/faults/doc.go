// Package faults runs the githubbinding controller binary, as users run
// it, against a real kube-apiserver and breaks what it depends on: the
// certificates Secret (deleted, its CA key removed) during a burst of
// creates, the MutatingWebhookConfiguration (edited, deleted and re-applied
// from config/), the process itself (stopped with failurePolicy Fail, or
// killed while it leads), another client editing a subject ten times a
// second, a cause of failure that lasts longer than any retry budget, and
// subjects without a pod template; to show that admissions keep succeeding,
// the configuration heals, the webhook is called only where Bindings apply,
// and every Binding lands and reports the truth.
// Its subpackage outage makes the Secret unwritable while rotations are
// due.
//
// Harness, the code both share, installs config/'s webhook configuration
// reached by URL on 127.0.0.1, starts and stops the binary, and drives
// load through the kube-apiserver.
package faults
