package bindingtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/envtest"
)

// AuditOptions configure Audit; see audit.Options. Its zero value audits
// every namespace's built-in workloads.
type AuditOptions struct {
	// Namespace limits the audit; default: all.
	Namespace string
	// Kinds let the audit run the Do of code kinds (declarative kinds need
	// none).
	Kinds []audit.Kind
	// Settle is how long the audit waits for the records to settle (a
	// reconcile in flight) before it reports. Default: 10 seconds.
	Settle time.Duration
}

// auditTimeout bounds one audit of the API server.
const auditTimeout = 2 * time.Minute

// Audit runs the audit of package audit against env and fails t with
// every finding (each with its fix) that is still there once the records
// had Settle to settle. Run it at the end of a test, while the
// controller still runs: a record that is not the truth is a bug.
func Audit(t testing.TB, env *envtest.Environment, opts AuditOptions) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	settle := opts.Settle
	if settle == 0 {
		settle = 10 * time.Second
	}
	// Settle bounds when the last audit starts, not how long one runs: an
	// audit of many workloads takes its time, and one cut short proves
	// nothing.
	var findings []audit.Finding
	for deadline := time.Now().Add(settle); ; time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
		findings, err = audit.Run(ctx, audit.Options{Dynamic: dyn, Mapper: mapper, Namespace: opts.Namespace, Kinds: opts.Kinds})
		cancel()
		if (err == nil && len(findings) == 0) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if len(findings) > 0 {
		lines := make([]string, len(findings))
		for i, f := range findings {
			lines[i] = f.String()
		}
		t.Errorf("audit: %d records are not the truth:\n%s", len(findings), strings.Join(lines, "\n"))
	}
}
