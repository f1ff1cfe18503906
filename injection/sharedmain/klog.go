package sharedmain

import (
	"go.uber.org/zap"

	"github.com/bindkit/bindkit/internal/processwide"
)

// InstallProcessHooks sets, once per process, what client-go accepts only
// process-wide: klog's logger (client-go's: leader election, reflectors,
// the rate limiter's throttling, the event broadcaster), routed into the
// zap logger of the Run that is running, and client-go's request metric
// hooks, routed into its metrics. Run calls it before it makes a client.
//
// client-go reads both without a lock on every request, so they must be
// set before anything in the process uses client-go concurrently. A
// program that starts client-go work of its own before Run, such as a
// test that runs Run while its own clients poll, calls InstallProcessHooks
// first (in TestMain). Calls after the first do nothing.
//
// While no Run is running, klog's lines go to stderr as JSON at info.
func InstallProcessHooks() { processwide.Install() }

// routeKlog sends klog's lines to logger, named "klog", filtered by level
// (which config-logging changes at run time), until detach is called: V(0)
// lines are info; V(1) to V(4) are debug, so they show when the process
// logs at debug; more detailed ones (request URLs, headers, bodies) never
// do. Objects are logged by namespace and name, never whole. When several
// Runs share a test binary, the one attached last and still running gets
// the lines (package internal/processwide).
func routeKlog(logger *zap.Logger, level zap.AtomicLevel) (detach func()) {
	processwide.Install()
	return processwide.KlogSlot.Attach(&processwide.KlogTarget{Logger: logger.Named("klog"), Level: level})
}
