package cli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/bindkit/bindkit/audit"
)

func auditCommand() command {
	return command{
		name:    "audit",
		summary: "report the records bindkit keeps on workloads that are not the truth, with their fixes",
		usage: `kubectl bindkit audit [-n NAMESPACE | -A] [--fix] [flags]

The cluster check of package audit (the same as bindkit audit): records of
Bindings that are gone (or were created again under their name),
generations a Binding has not reached, subjects that do not carry the
declared change they record, rollback records of a generation not carried,
holds a complete rollout should have lifted. Each finding comes with its
fix, a merge patch of the subject, as a kubectl command; --fix applies
them. It also lists the Bindings with no record of who asked for them
(written before bindkit recorded their author), which do not change the
exit status.

Examples:
  kubectl bindkit audit -n shop
  kubectl bindkit audit -A -o json
  kubectl bindkit audit -A --fix`,
		flags: func(fs *pflag.FlagSet, o *options) {
			fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "audit every namespace")
			fs.BoolVar(&o.fix, "fix", false, "apply each subject's fix after the report")
		},
		run: runAudit,
	}
}

func runAudit(ctx context.Context, o *options, args []string) error {
	if len(args) > 0 {
		return usageError(o, "audit takes no arguments, got %q", args)
	}
	if err := o.connect(); err != nil {
		return err
	}
	ns := o.cluster.namespace
	if o.allNamespaces {
		ns = ""
	}
	opts := audit.Options{Dynamic: o.cluster.dynamic, Mapper: o.cluster.mapper, Namespace: ns}
	findings, err := audit.Run(ctx, opts)
	if err != nil {
		return err
	}
	unattributed, err := audit.Unattributed(ctx, opts)
	if err != nil {
		return err
	}
	if err := audit.Write(o.stdout, findings, o.output); err != nil {
		return err
	}
	report := o.stderr
	if o.output == "" || o.output == "table" {
		report = o.stdout
	}
	if err := audit.WriteUnattributed(report, unattributed); err != nil {
		return err
	}
	if len(findings) == 0 {
		return nil
	}
	if !o.fix {
		return quietExit(ExitChanges)
	}
	fixed := map[string]bool{}
	for _, f := range findings {
		if fixed[f.Subject] {
			continue // one fix covers every finding of a subject
		}
		fixed[f.Subject] = true
		if err := audit.Apply(ctx, o.cluster.dynamic, f); err != nil {
			return fmt.Errorf("fix %s: %w", f.Subject, err)
		}
	}
	fmt.Fprintf(o.stderr, "applied the fixes of %s\n", counted(int64(len(fixed)), "subject"))
	return nil
}
