package cli

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bindkit/bindkit/psbinding"
)

// printWhy prints the Bindings of a workload as a table, then what the
// workload carries of each beside what each adds now, its records beyond
// the bound one, and the Bindings of the namespace that do not apply.
func printWhy(w io.Writer, v whyView) error {
	if len(v.Bindings) == 0 {
		fmt.Fprintf(w, "%s (namespace %s): no Binding records it\n", v.Workload, v.Namespace)
		return printNotApplied(w, v, "The Bindings of namespace "+v.Namespace+", and why each does not apply:")
	}
	fmt.Fprintf(w, "%s (namespace %s) records %s:\n\n", v.Workload, v.Namespace, counted(int64(len(v.Bindings)), "Binding"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BINDING\tCARRIES\tCURRENT\tSTATE\tREASON")
	for _, e := range v.Bindings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Binding, generation(e.Recorded), generation(e.Current), e.State, cmp.Or(e.Reason, "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range v.Bindings {
		if lines := whyLines(e); len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n  %s\n", e.Binding, strings.Join(lines, "\n  "))
		}
	}
	return printNotApplied(w, v, "Bindings of namespace "+v.Namespace+" that select it and do not apply:")
}

// whyLines says, for one recorded Binding, who asked for it, what the
// workload carries of it against what it adds now, and its records.
func whyLines(e whyEntry) []string {
	var lines []string
	if e.State != "gone" {
		lines = append(lines, requestedBy(e.RequestedBy))
	}
	lines = append(lines, carriedLines(e)...)
	if e.Wave > 0 {
		lines = append(lines, fmt.Sprintf("changed to generation %d by wave %d at %s", e.ChangedTo, e.Wave, e.Since.UTC().Format(time.RFC3339)))
	}
	if e.Held > 0 {
		lines = append(lines, fmt.Sprintf("held from generation %d: admission does not apply it here (its rollout halted and rolled this back)", e.Held))
	}
	if e.State != stateComplete && e.Message != "" {
		lines = append(lines, e.Message)
	}
	return lines
}

// carriedLines says what the workload carries of a Binding: where it
// carries the generation whose declared Spec the Binding published,
// what that adds; otherwise the generation it carries (and how the
// current generation's spec differs from it, where the rollout history
// keeps it), the values its pod template holds, and what the current
// generation adds.
func carriedLines(e whyEntry) []string {
	if len(e.Adds) > 0 && e.AddsOf == e.Recorded {
		return []string{"adds: " + strings.Join(e.Adds, "; ")}
	}
	var lines []string
	if e.Recorded > 0 && e.Current > 0 && e.Recorded != e.Current {
		switch {
		case e.CarriedFrom == carriedFromHistory && len(e.SpecChanges) > 0:
			lines = append(lines, fmt.Sprintf("carries generation %d; its spec (from the rollout history) and generation %d's differ in: %s",
				e.Recorded, e.Current, strings.Join(e.SpecChanges, "; ")))
		case e.CarriedFrom == carriedFromHistory:
			lines = append(lines, fmt.Sprintf("carries generation %d, whose spec (from the rollout history) is generation %d's", e.Recorded, e.Current))
		default:
			lines = append(lines, fmt.Sprintf("carries generation %d, whose spec is not recorded (%s keeps the last %d generations whose paced rollout completed)",
				e.Recorded, psbinding.RolloutHistoryAnnotation, psbinding.MaxRolloutHistory))
		}
	}
	if len(e.Carries) > 0 {
		lines = append(lines, "carries in its pod template: "+strings.Join(e.Carries, "; "))
	}
	if len(e.Adds) > 0 {
		lines = append(lines, fmt.Sprintf("generation %d adds: %s", e.AddsOf, strings.Join(e.Adds, "; ")))
	}
	return lines
}

// printNotApplied prints the Bindings of the namespace that do not
// apply, under title, and the kinds that could not be read.
func printNotApplied(w io.Writer, v whyView, title string) error {
	if len(v.NotApplied) > 0 {
		fmt.Fprintf(w, "\n%s\n", title)
	} else if len(v.Bindings) == 0 {
		fmt.Fprintf(w, "\nNo Binding (kubectl's %q category) is in namespace %s.\n", bindingsCategory, v.Namespace)
	}
	for _, e := range v.NotApplied {
		what := "does not select it"
		if e.Selects {
			what = "selects it"
		}
		lines := e.Reasons
		if e.RequestedBy != "" {
			lines = append(lines[:len(lines):len(lines)], "requested by "+e.RequestedBy)
		}
		fmt.Fprintf(w, "\n%s %s:\n  %s\n", e.Binding, what, strings.Join(lines, "\n  "))
	}
	if len(v.Unread) > 0 {
		fmt.Fprintf(w, "\nNot read (these kinds' Bindings are not listed above):\n  %s\n", strings.Join(v.Unread, "\n  "))
	}
	return nil
}
