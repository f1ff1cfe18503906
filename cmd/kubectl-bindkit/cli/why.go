package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
)

func whyCommand() command {
	return command{
		name:    "why",
		summary: "name the Bindings recorded on a workload and what it carries of each, or why none applies",
		usage: `kubectl bindkit why TYPE/NAME [flags]

Reads the records bindkit keeps on the workload (which Bindings bound it,
at which generation, their paced changes and holds), then each Binding:
its current generation, where its rollout stands, what the workload
carries of it (the spec of the generation it records, from the Binding's
rollout history when that is not the current one; for a declarative
kind, the values its pod template holds) beside what the current
generation adds.

It also reads every Binding of the workload's namespace (the kinds in
kubectl's "bindings" category) that the workload does not record, and
says why each does not apply: the kind it binds, its name or selector,
the exclude label on the workload or its namespace, a namespace left
out, or where the Binding stands (not yet reconciled, paused, undone,
refused, halted, rolling out). For a workload no Binding records it
lists them all; otherwise those that select the workload.

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
	// CarriedSpec is the Binding's spec at the generation the workload
	// carries (Recorded), and CarriedFrom where it was read: "current"
	// (the Binding is at that generation) or "rollout-history"
	// (psbinding.RolloutHistoryAnnotation, which keeps the generations
	// whose rollout completed); both empty when neither holds it.
	CarriedSpec json.RawMessage `json:"carriedSpec,omitempty"`
	CarriedFrom string          `json:"carriedFrom,omitempty"`
	// SpecChanges says, field by field, how the current generation's
	// spec differs from CarriedSpec.
	SpecChanges []string `json:"specChanges,omitempty"`
	// Carries is what the workload carries of what the Binding declares,
	// where its kind declares it: the declared Spec of the generation it
	// records when the Binding published that one (then Carries is Adds),
	// else the values its pod template holds of what generation AddsOf
	// declares.
	Carries []string `json:"carries,omitempty"`
	// Adds is what the Binding adds, where its kind declares it, as of
	// generation AddsOf (the one its status published).
	Adds   []string `json:"adds,omitempty"`
	AddsOf int64    `json:"addsOf,omitempty"`
	// RequestedBy is the user who last created the Binding or changed its
	// spec, as the kube-apiserver recorded them
	// (policy.RequestedByAnnotation): whose authority it carries. Empty
	// for a Binding written before the record existed.
	RequestedBy string `json:"requestedBy,omitempty"`
}

// whyNotEntry is a Binding of the workload's namespace that the workload
// does not record, and why it does not apply.
type whyNotEntry struct {
	Binding string `json:"binding"`
	// Selects says whether its subject reference reaches the workload
	// (kind, and name or selector).
	Selects bool `json:"selects"`
	// Reasons say why it does not apply, each starting with its cause
	// ("selector:", "exclude label:", "namespace:", "kind not bound:",
	// "paused:", "refused:", ...).
	Reasons     []string `json:"reasons"`
	RequestedBy string   `json:"requestedBy,omitempty"`
}

// whyView is what why prints as json or yaml.
type whyView struct {
	Workload  string     `json:"workload"`
	Namespace string     `json:"namespace"`
	Bindings  []whyEntry `json:"bindings"`
	// NotApplied are the Bindings of the namespace the workload does not
	// record, with why each does not apply: all of them for a workload no
	// Binding records, those that select it otherwise.
	NotApplied []whyNotEntry `json:"notApplied,omitempty"`
	// Unread are the Binding kinds whose Bindings could not be listed,
	// with why.
	Unread []string `json:"unread,omitempty"`
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
	v := whyView{Workload: w.String(), Namespace: w.u.GetNamespace(), Bindings: []whyEntry{}}
	recorded, err := whyRecorded(ctx, o, w)
	if err != nil {
		return err
	}
	v.Bindings = recorded
	if v.NotApplied, v.Unread, err = whyNotApplied(ctx, o, w); err != nil {
		return err
	}
	if len(v.Bindings) > 0 {
		v.NotApplied = slices.DeleteFunc(v.NotApplied, func(e whyNotEntry) bool { return !e.Selects })
	}
	if o.output == "json" || o.output == "yaml" {
		return printData(o.stdout, o.output, v)
	}
	return printWhy(o.stdout, v)
}

// whyRecorded reads the Bindings w's records name (bound, held, paced),
// sorted.
func whyRecorded(ctx context.Context, o *options, w *object) ([]whyEntry, error) {
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
	out := []whyEntry{}
	for _, key := range slices.Sorted(maps.Keys(named)) {
		by := named[key]
		e := whyEntry{}
		e.Recorded, _ = bound.Lookup(by)
		e.Held, _ = held.Lookup(by)
		if c, ok := changes.Lookup(by); ok {
			since := c.Since
			e.ChangedTo, e.Wave, e.Since = c.Generation, c.Wave, &since
		}
		if err := whyBinding(ctx, o, w, by, &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b whyEntry) int { return cmp.Compare(a.Binding, b.Binding) })
	return out, nil
}

// whyBinding reads the Binding by names in w's namespace into e, whose
// records are read.
func whyBinding(ctx context.Context, o *options, w *object, by duck.BoundBy, e *whyEntry) error {
	namespace := w.u.GetNamespace()
	e.Binding, e.Resource, e.State = by.Resource.String()+"/"+by.Name, by.Resource.String(), "gone"
	gvr, err := o.cluster.mapper.ResourceFor(by.Resource.WithVersion(""))
	if err != nil {
		e.Message = fmt.Sprintf("the server serves no resource %s", by.Resource)
		return nil
	}
	if gvk, err := o.cluster.mapper.KindFor(gvr); err == nil {
		e.Binding = refName(gvk.GroupKind(), by.Name)
	}
	u, err := o.cluster.dynamic.Resource(gvr).Namespace(namespace).Get(ctx, by.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		e.Message = "no such Binding: the records outlived it (kubectl bindkit audit fixes them)"
		return nil
	case err != nil:
		return fmt.Errorf("get %s %s/%s: %w", by.Resource, namespace, by.Name, err)
	case by.UID != "" && u.GetUID() != by.UID:
		e.Message = fmt.Sprintf("the Binding of that name has UID %s, not %s: it was deleted and created again", u.GetUID(), by.UID)
		return nil
	}
	view := viewOf(&object{gvr: gvr, u: u})
	e.Current, e.State, e.Reason, e.Message = u.GetGeneration(), view.State, view.Reason, view.Message
	e.RequestedBy = u.GetAnnotations()[policy.RequestedByAnnotation]
	carried(e, u, w)
	return nil
}

// carried fills in what w carries of the Binding u, at e.Recorded,
// beside what u's current generation adds.
func carried(e *whyEntry, u *unstructured.Unstructured, w *object) {
	if e.Recorded > 0 {
		current, _ := json.Marshal(u.Object["spec"])
		e.CarriedSpec, e.CarriedFrom = carriedSpec(u.GetAnnotations(), e.Current, current, e.Recorded)
		if e.CarriedFrom == carriedFromHistory {
			e.SpecChanges = specChanges(e.CarriedSpec, current)
		}
	}
	st := statusOf(u)
	if st.Declared == nil {
		return
	}
	e.Adds, e.AddsOf = adds(st.Declared), st.DeclaredGeneration
	switch {
	case e.Recorded == 0:
	case e.AddsOf == e.Recorded:
		e.Carries = e.Adds
	default:
		if wp, err := (duck.Shapes{}).For(w.kind.GroupKind()).FromUnstructured(w.u); err == nil {
			e.Carries = templateValues(st.Declared, &wp.Spec.Template.Spec)
		}
	}
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
