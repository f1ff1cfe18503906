package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindkit/bindkit/audit"
)

// errFindings is returned, after the report, when the audit found
// records that are not the truth: exit status 3, as kubectl bindkit
// audit's, so a script tells findings from an error (1).
var errFindings = fmt.Errorf("records that are not the truth were found")

// runAudit is `bindkit audit`: package audit against the cluster of the
// kubeconfig.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `file` (default: $KUBECONFIG, then ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig `context` (default: the current one)")
	namespace := fs.String("n", "", "audit one `namespace` only (default: every namespace)")
	output := fs.String("o", "table", "output `format`: table, json or yaml")
	fix := fs.Bool("fix", false, "apply each subject's fix after the report")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: bindkit audit [-kubeconfig FILE] [-context NAME] [-n NAMESPACE] [-o table|json|yaml] [-fix]

Reads the cluster and reports every record bindkit keeps on workloads that
is not the truth: records of Bindings that are gone (or were re-created
under their name), generations a Binding has not reached, subjects that do
not carry the declared change they record, rollback records of a
generation not carried, holds a complete rollout should have lifted. Each
finding comes with the fix (a merge patch of the subject, as a kubectl
command); -fix applies them. It also lists the Bindings with no record of
who asked for them (written before bindkit recorded their author), which
do not change the exit status. Exit status: 0 with no finding, 3 with
findings (as kubectl bindkit audit), 1 for an error, 2 for bad usage.

Examples:
  bindkit audit
  bindkit audit -n payments -o json
  bindkit audit -fix`)
		fs.PrintDefaults()
	}
	if err := parseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubeContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("audit: kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	opts := audit.Options{Dynamic: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)), Namespace: *namespace}
	findings, err := audit.Run(ctx, opts)
	if err != nil {
		return err
	}
	unattributed, err := audit.Unattributed(ctx, opts)
	if err != nil {
		return err
	}
	if err := audit.Write(stdout, findings, *output); err != nil {
		return err
	}
	if err := audit.WriteUnattributed(reportTo(*output, stdout, stderr), unattributed); err != nil {
		return err
	}
	if *fix {
		fixed := map[string]bool{}
		for _, f := range findings {
			if fixed[f.Subject] {
				continue // one fix covers every finding of a subject
			}
			fixed[f.Subject] = true
			if err := audit.Apply(ctx, dyn, f); err != nil {
				return fmt.Errorf("audit: fix %s: %w", f.Subject, err)
			}
		}
		fmt.Fprintf(stderr, "applied the fixes of %d findings\n", len(findings))
		return nil
	}
	if len(findings) > 0 {
		return errFindings
	}
	return nil
}

// reportTo is where a report beside the findings goes: after the table,
// or to stderr, so that json and yaml stay one document.
func reportTo(format string, stdout, stderr io.Writer) io.Writer {
	if format == "" || format == "table" {
		return stdout
	}
	return stderr
}
