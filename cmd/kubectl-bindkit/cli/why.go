package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
)

func whyCommand() command {
	return command{
		name:    "why",
		summary: "name the Bindings recorded on a workload: the generation it carries of each against the current one, their state, what each adds",
		usage: `kubectl bindkit why TYPE/NAME [flags]

Reads the records bindkit keeps on the workload (which Bindings bound it,
at which generation, their paced changes and holds), then each Binding:
its current generation, where its rollout stands, and what it adds, where
its kind declares it (a declarative kind publishes what it adds).

Examples:
  kubectl bindkit why deployment/web -n shop
  kubectl bindkit why statefulset/db -n shop -o yaml`,
		run: runWhy,
	}
}

// whyEntry is one Binding recorded on a workload.
type whyEntry struct {
	// Binding names it as kubectl does; Resource is its group resource.
	Binding  string `json:"binding"`
	Resource string `json:"resource"`
	// Recorded is the generation the workload carries (its bound
	// record), 0 when it carries none (only a hold or a paced change is
	// recorded); Current the Binding's, 0 when it is gone.
	Recorded int64 `json:"recorded,omitempty"`
	Current  int64 `json:"current,omitempty"`
	// State is where the Binding's rollout stands (rollout status's
	// states), "gone" when the Binding is, and Reason and Message its
	// Ready condition's.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Held is the generation the workload is held from, after a halt.
	Held int64 `json:"held,omitempty"`
	// Wave and Since say which wave of a paced rollout last changed the
	// workload, to generation ChangedTo, and when.
	ChangedTo int64      `json:"changedTo,omitempty"`
	Wave      int        `json:"wave,omitempty"`
	Since     *time.Time `json:"since,omitempty"`
	// Adds is what the Binding adds, where its kind declares it, as of
	// generation AddsOf.
	Adds   []string `json:"adds,omitempty"`
	AddsOf int64    `json:"addsOf,omitempty"`
	// RequestedBy is the user who last created the Binding or changed its
	// spec, as the kube-apiserver recorded them
	// (policy.RequestedByAnnotation): whose authority it carries. Empty
	// for a Binding written before the record existed.
	RequestedBy string `json:"requestedBy,omitempty"`
}

// whyView is what why prints as json or yaml.
type whyView struct {
	Workload  string     `json:"workload"`
	Namespace string     `json:"namespace"`
	Bindings  []whyEntry `json:"bindings"`
}

func runWhy(ctx context.Context, o *options, args []string) error {
	typ, name, err := oneObject(o, "workload", args)
	if err != nil {
		return err
	}
	if err := o.connect(); err != nil {
		return err
	}
	w, err := o.cluster.get(ctx, typ, name)
	if err != nil {
		return err
	}
	ann := w.u.GetAnnotations()
	bound, held, changes := duck.BoundOf(ann), duck.HeldOf(ann), duck.ChangesOf(ann)
	named := map[string]duck.BoundBy{}
	for _, set := range []map[duck.BoundBy]int64{bound, held} {
		for by := range set {
			named[by.String()] = by
		}
	}
	for by := range changes {
		named[by.String()] = by
	}
	v := whyView{Workload: w.String(), Namespace: w.u.GetNamespace(), Bindings: []whyEntry{}}
	for _, key := range slices.Sorted(maps.Keys(named)) {
		by := named[key]
		e, err := whyBinding(ctx, o, w.u.GetNamespace(), by)
		if err != nil {
			return err
		}
		e.Recorded, _ = bound.Lookup(by)
		e.Held, _ = held.Lookup(by)
		if c, ok := changes.Lookup(by); ok {
			since := c.Since
			e.ChangedTo, e.Wave, e.Since = c.Generation, c.Wave, &since
		}
		v.Bindings = append(v.Bindings, e)
	}
	slices.SortFunc(v.Bindings, func(a, b whyEntry) int { return cmp.Compare(a.Binding, b.Binding) })
	if o.output == "json" || o.output == "yaml" {
		return printData(o.stdout, o.output, v)
	}
	return printWhy(o.stdout, v)
}

// whyBinding reads the Binding by names in namespace.
func whyBinding(ctx context.Context, o *options, namespace string, by duck.BoundBy) (whyEntry, error) {
	e := whyEntry{Binding: by.Resource.String() + "/" + by.Name, Resource: by.Resource.String(), State: "gone"}
	gvr, err := o.cluster.mapper.ResourceFor(by.Resource.WithVersion(""))
	if err != nil {
		e.Message = fmt.Sprintf("the server serves no resource %s", by.Resource)
		return e, nil
	}
	if gvk, err := o.cluster.mapper.KindFor(gvr); err == nil {
		e.Binding = refName(gvk.GroupKind(), by.Name)
	}
	u, err := o.cluster.dynamic.Resource(gvr).Namespace(namespace).Get(ctx, by.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		e.Message = "no such Binding: the records outlived it (kubectl bindkit audit fixes them)"
		return e, nil
	case err != nil:
		return e, fmt.Errorf("get %s %s/%s: %w", by.Resource, namespace, by.Name, err)
	case by.UID != "" && u.GetUID() != by.UID:
		e.Message = fmt.Sprintf("the Binding of that name has UID %s, not %s: it was deleted and created again", u.GetUID(), by.UID)
		return e, nil
	}
	view := viewOf(&object{gvr: gvr, u: u})
	e.Current, e.State, e.Reason, e.Message = u.GetGeneration(), view.State, view.Reason, view.Message
	e.RequestedBy = u.GetAnnotations()[policy.RequestedByAnnotation]
	if st := statusOf(u); st.Declared != nil {
		e.Adds, e.AddsOf = adds(st.Declared), st.DeclaredGeneration
	}
	return e, nil
}

// adds lists what a declared Spec adds to a pod template.
func adds(s *declarative.Spec) []string {
	var out []string
	for _, e := range s.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "(from a source)"
		}
		out = append(out, "env "+e.Name+"="+v)
	}
	for _, e := range s.EnvFrom {
		switch {
		case e.ConfigMapRef != nil:
			out = append(out, "envFrom configmap/"+e.ConfigMapRef.Name)
		case e.SecretRef != nil:
			out = append(out, "envFrom secret/"+e.SecretRef.Name)
		}
	}
	for _, m := range s.VolumeMounts {
		out = append(out, "mount "+m.Name+" at "+m.MountPath)
	}
	for _, vol := range s.Volumes {
		out = append(out, "volume "+vol.Name)
	}
	for _, c := range s.InitContainers {
		out = append(out, "init container "+c.Name+" ("+c.Image+")")
	}
	for _, c := range s.Containers {
		out = append(out, "container "+c.Name+" ("+c.Image+")")
	}
	return out
}

// printWhy prints the Bindings of a workload as a table, then what each
// adds and its records beyond the bound one.
func printWhy(w io.Writer, v whyView) error {
	if len(v.Bindings) == 0 {
		_, err := fmt.Fprintf(w, "%s (namespace %s): no Binding records it\n", v.Workload, v.Namespace)
		return err
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
		var lines []string
		if e.State != "gone" {
			lines = append(lines, requestedBy(e.RequestedBy))
		}
		if len(e.Adds) > 0 {
			of := ""
			if e.AddsOf != e.Recorded {
				of = fmt.Sprintf(" (as of generation %d)", e.AddsOf)
			}
			lines = append(lines, "adds"+of+": "+strings.Join(e.Adds, "; "))
		}
		if e.Wave > 0 {
			lines = append(lines, fmt.Sprintf("changed to generation %d by wave %d at %s", e.ChangedTo, e.Wave, e.Since.UTC().Format(time.RFC3339)))
		}
		if e.Held > 0 {
			lines = append(lines, fmt.Sprintf("held from generation %d: admission does not apply it here (its rollout halted and rolled this back)", e.Held))
		}
		if e.State != stateComplete && e.Message != "" {
			lines = append(lines, e.Message)
		}
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n  %s\n", e.Binding, strings.Join(lines, "\n  "))
		}
	}
	return nil
}

// requestedBy says whose authority a Binding carries.
func requestedBy(user string) string {
	if user == "" {
		return "requested by: not recorded (written before bindkit recorded its author; kubectl bindkit audit lists such Bindings)"
	}
	return "requested by " + user + " (the last to create it or change its spec)"
}

// generation formats a generation for a table, "-" for none.
func generation(g int64) string {
	if g == 0 {
		return "-"
	}
	return fmt.Sprint(g)
}
