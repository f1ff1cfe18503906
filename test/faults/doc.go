// Package faults runs the githubbinding controller binary, as users run
// it, against a real kube-apiserver and breaks what it depends on: the
// process itself (stopped, or killed while it leads), another client
// editing a subject ten times a second, and subjects without a pod
// template; to show that every Binding lands and reports the truth.
// Its subpackages break more, each against its own control plane so that
// they run side by side: admission (the certificates Secret and the
// webhook configuration during a burst of creates, and where the webhook
// is called), backoff (a cause of failure that lasts longer than any retry
// budget) and outage (the Secret unwritable while rotations are due).
//
// Harness, the code both share, installs config/'s webhook configuration
// reached by URL on 127.0.0.1, starts and stops the binary, and drives
// load through the kube-apiserver.
package faults
