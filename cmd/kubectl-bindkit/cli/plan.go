package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

func planCommand() command {
	return command{
		name:    "plan",
		summary: "show what resuming a paused Binding would do to its subjects, as kubectl diff does",
		usage: `kubectl bindkit plan TYPE/NAME [flags]

While a Binding is paused (kubectl bindkit rollout pause), its controller
computes what resuming it would do, with the Binding's own Do and Undo on
the subjects as they are, and publishes it in the Binding's status. plan
waits (up to --timeout) for the plan of the Binding's current generation,
then prints the waves the rollout policy would take and each change with
the subjects it is the change of: "+" adds, "-" removes, "~" replaces, at
a path of the subject's object.

Examples:
  kubectl bindkit rollout pause sinkbinding/sink -n shop
  kubectl -n shop apply -f sink.yaml
  kubectl bindkit plan sinkbinding/sink -n shop
  kubectl bindkit plan sinkbinding/sink -n shop -o json | jq '.plan.changes[0].patch | fromjson'`,
		flags: func(fs *pflag.FlagSet, o *options) {
			fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the controller to publish the plan of the current generation")
		},
		run: runPlan,
	}
}

// planView is what plan prints as json or yaml.
type planView struct {
	Binding    string           `json:"binding"`
	Namespace  string           `json:"namespace"`
	Generation int64            `json:"generation"`
	Paused     bool             `json:"paused"`
	Plan       *duck.PlanStatus `json:"plan"`
}

func runPlan(ctx context.Context, o *options, args []string) error {
	typ, name, err := oneObject(o, "Binding", args)
	if err != nil {
		return err
	}
	if err := o.connect(); err != nil {
		return err
	}
	b, err := o.cluster.get(ctx, typ, name)
	if err != nil {
		return err
	}
	if !pausedOf(b.u) {
		return fmt.Errorf("%s is not paused: nothing is planned; kubectl bindkit rollout pause %s holds it, and its next change is planned", b, b)
	}
	plan, err := waitForPlan(ctx, o, b)
	if err != nil {
		return err
	}
	v := planView{Binding: b.String(), Namespace: b.u.GetNamespace(), Generation: b.u.GetGeneration(), Paused: true, Plan: plan}
	if o.output == "json" || o.output == "yaml" {
		err = printData(o.stdout, o.output, v)
	} else {
		err = printPlan(o.stdout, v)
	}
	if err != nil {
		return err
	}
	return quietExit(planExit(plan))
}

// planExit is plan's exit status: ExitChanges when resuming would change
// a pod template (or the plan does not show every change), else ExitOK.
func planExit(p *duck.PlanStatus) int {
	if c := countPlan(p); c.Template+c.Unknown > 0 {
		return ExitChanges
	}
	return ExitOK
}

// planCounts splits the subjects a plan binds or unbinds by what their
// change does: Template counts those whose pod template changes (a pod
// rollout each), RecordsOnly those whose change is bindkit's records
// alone, Unknown those whose change the plan does not show (not read, or
// a change beyond the ones it lists).
type planCounts struct {
	Template, RecordsOnly, Unknown int
}

// countPlan splits p's subjects by what their change does, from the
// changes it shows: a change whose patch is "[]" leaves the template as
// it is (duck.PlanChange.Patch).
func countPlan(p *duck.PlanStatus) planCounts {
	var c planCounts
	for _, ch := range p.Changes {
		if isEmptyPatch(ch.Patch) && !ch.Truncated {
			c.RecordsOnly += ch.Count
		} else {
			c.Template += ch.Count
		}
	}
	c.Unknown = max(0, p.Bind+p.Unbind-c.Template-c.RecordsOnly)
	return c
}

// isEmptyPatch reports whether a JSON patch has no operation.
func isEmptyPatch(patch string) bool {
	var ops []json.RawMessage
	return json.Unmarshal([]byte(patch), &ops) == nil && len(ops) == 0
}

// waitForPlan reads b until its status holds the plan of its current
// generation (or of the undo of it), for at most --timeout.
func waitForPlan(ctx context.Context, o *options, b *object) (*duck.PlanStatus, error) {
	deadline := time.Now().Add(o.timeout)
	for {
		st := statusOf(b.u)
		gen := b.u.GetGeneration()
		if p := st.Plan; p != nil && st.ObservedGeneration == gen && (p.Generation == gen || p.UndoneFrom == gen) {
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: its controller has not published the plan of generation %d within %v (status.observedGeneration %d)", b, gen, o.timeout, st.ObservedGeneration)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		u, err := o.cluster.dynamic.Resource(b.gvr).Namespace(b.u.GetNamespace()).Get(ctx, b.u.GetName(), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b, err)
		}
		b.u = u
	}
}

// printPlan prints a plan as a reader takes it in: what it changes, the
// waves, then each change with its subjects.
func printPlan(w io.Writer, v planView) error {
	p := v.Plan
	what := fmt.Sprintf("generation %d", p.Generation)
	if p.UndoneFrom > 0 {
		what = fmt.Sprintf("the undo of generation %d, back to generation %d", p.UndoneFrom, p.Generation)
	}
	fmt.Fprintf(w, "%s (namespace %s) is paused. Resuming it rolls out %s:\n", v.Binding, v.Namespace, what)
	fmt.Fprintf(w, "  %s selected: %d to bind, %d to unbind, %d unchanged\n", counted(int64(p.Total), "subject"), p.Bind, p.Unbind, p.Unchanged)
	c := countPlan(p)
	split := fmt.Sprintf("  %s, %d records only", counted(int64(c.Template), "template change"), c.RecordsOnly)
	if c.Unknown > 0 {
		split += fmt.Sprintf(", %d not shown", c.Unknown)
	}
	fmt.Fprintln(w, split)
	if c.Template+c.Unknown == 0 && c.RecordsOnly > 0 {
		fmt.Fprintln(w, "  no pod template changes: resuming writes bindkit's records only")
	}
	if len(p.Waves) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WAVE\tSUBJECTS\tNAMES")
		for _, wave := range p.Waves {
			fmt.Fprintf(tw, "%d\t%d\t%s\n", wave.Number, wave.Count, names(wave.Subjects, wave.Count, 4))
		}
		if p.MoreWaves > 0 {
			fmt.Fprintf(tw, "...\t\t%d more waves\n", p.MoreWaves)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, c := range p.Changes {
		fmt.Fprintf(w, "\n%s %s: %s\n", c.Action, counted(int64(c.Count), "subject"), names(c.Subjects, c.Count, 6))
		for _, line := range patchLines(c.Patch) {
			fmt.Fprintln(w, "  "+line)
		}
		if c.Truncated {
			fmt.Fprintf(w, "  (patch cut at %d bytes; -o json shows what was kept)\n", duck.MaxPlanPatchBytes)
		}
	}
	if p.OtherChanges > 0 {
		fmt.Fprintf(w, "\n%d more subjects read, with changes of their own not shown\n", p.OtherChanges)
	}
	if p.NotRead > 0 {
		fmt.Fprintf(w, "\n%d more subjects not read: the plan shows the first %d\n", p.NotRead, duck.MaxPlanRead)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(w, "\nerror: %s: %s\n", e.Name, e.Reason)
	}
	fmt.Fprintf(w, "\nkubectl bindkit rollout resume %s -n %s applies it.\n", v.Binding, v.Namespace)
	return nil
}

// names lists up to n of shown, saying how many of count it leaves out.
func names(shown []string, count, n int) string {
	list := strings.Join(shown[:min(len(shown), n)], ", ")
	if rest := count - min(len(shown), n); rest > 0 {
		list += fmt.Sprintf(" and %d more", rest)
	}
	return list
}

// patchLines renders a JSON patch a line per operation, the way a diff
// reads: "+ path: value" for add, "- path" for remove, "~ path: value"
// for replace.
func patchLines(patch string) []string {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		From  string          `json:"from"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(patch), &ops); err != nil {
		return []string{patch}
	}
	if len(ops) == 0 {
		return []string{"(no change to the pod template: only bindkit's records)"}
	}
	out := make([]string, 0, len(ops))
	for _, op := range ops {
		switch op.Op {
		case "add":
			out = append(out, fmt.Sprintf("+ %s: %s", op.Path, op.Value))
		case "remove":
			out = append(out, fmt.Sprintf("- %s", op.Path))
		case "replace":
			out = append(out, fmt.Sprintf("~ %s: %s", op.Path, op.Value))
		default:
			out = append(out, fmt.Sprintf("%s %s %s %s", op.Op, op.From, op.Path, op.Value))
		}
	}
	return out
}
