// Package processwide holds the target of a hook that a library accepts
// once per process, for components that come and go within one.
//
// klog's logger (klog.SetLogger) and client-go's request metrics
// (k8s.io/client-go/tools/metrics.Register) are process-wide: the first
// is not safe to change while anything logs, the second can be set only
// once. A process built with injection/sharedmain runs one Run; a test
// binary may run several, one after another or at once. So the hook is
// installed once, forwarding to a Slot, and each Run attaches its own
// target to the Slot while it runs: the most recently attached target that
// is still attached receives what the hook forwards, and nothing does when
// none is attached.
//
// Install sets both hooks, once, before anything uses client-go
// concurrently (client-go reads them without a lock): klog's lines go to
// the KlogTarget attached to KlogSlot, and client-go's request metrics to
// the ClientGoMetrics attached to ClientGoSlot.
package processwide
