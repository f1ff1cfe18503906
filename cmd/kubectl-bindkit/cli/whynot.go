package cli

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// candidate is what why reads of a Binding of the workload's namespace
// that the workload does not record.
type candidate struct {
	// Name is the Binding's name as kubectl spells it, Namespace its
	// namespace.
	Name, Namespace string
	// Subject is its subject reference (policy.DefaultSubjectPath), nil
	// when there is none there; SubjectErr why it could not be read.
	Subject    *tracker.Reference
	SubjectErr error
	// Generation is the Binding's; ObservedGeneration its status's, and
	// Ready its Ready condition (nil when it has none).
	Generation, ObservedGeneration int64
	Ready                          *metav1.Condition
	// Deleting, Paused and Undo are its deletion and rollout controls.
	Deleting, Paused, Undo bool
}

// workloadFacts is what why reads of the workload a Binding may apply
// to: its kind, namespace, name and labels, and its namespace's labels
// (nil when they could not be read).
type workloadFacts struct {
	Kind            schema.GroupKind
	Namespace, Name string
	Labels          map[string]string
	NamespaceLabels map[string]string
}

// whyNot decides, from what was read, whether the Binding b selects or
// names workload w, and why it does not apply to it: for one that does
// not, what its subject reference reaches instead (the kind, the name or
// selector, parsed by tracker.Reference as the framework parses it, its
// namespace as psbinding.NamespaceError says); for one that does, what
// keeps the workload out (psbinding.ExcludeLabel on the workload or its
// namespace, a namespace of the cluster's own, the inclusion mode), else
// where the Binding stands (deleted, not yet reconciled, paused, undone,
// refused, halted, rolling out). A Binding that selects the workload and
// is kept from it by nothing says so.
func whyNot(b candidate, w workloadFacts) (selects bool, reasons []string) {
	selects, reasons = reaches(b, w)
	if !selects {
		return false, reasons
	}
	if kept := keptOut(b, w); len(kept) > 0 {
		return true, kept
	}
	if r := standing(b); r != "" {
		return true, append(reasons, r)
	}
	ready := "no Ready condition"
	if b.Ready != nil {
		ready = fmt.Sprintf("Ready %s, %s: %s", b.Ready.Status, b.Ready.Reason, b.Ready.Message)
	}
	return true, append(reasons, "it selects the workload and nothing keeps it out: its controller has not bound it yet ("+ready+")")
}

// reaches says whether b's subject reference reaches w, and if not, why.
func reaches(b candidate, w workloadFacts) (bool, []string) {
	if b.Subject == nil {
		why := "no subject reference at spec.subject"
		if b.SubjectErr != nil {
			why = b.SubjectErr.Error()
		}
		return false, []string{"its subject cannot be read: " + why}
	}
	ref := *b.Subject
	if ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	var reasons []string
	if ref.Namespace != b.Namespace {
		err := &psbinding.NamespaceError{Binding: b.Namespace + "/" + b.Name, BindingNamespace: b.Namespace, SubjectNamespace: ref.Namespace}
		reasons = append(reasons, "refused: "+err.Error())
	}
	gvk, err := ref.GroupVersionKind()
	if err == nil && gvk.GroupKind() != w.Kind {
		reasons = append(reasons, fmt.Sprintf("kind not bound: it binds %s, not %s", kindName(gvk.GroupKind()), kindName(w.Kind)))
	}
	sel, err := ref.Parse()
	switch {
	case err != nil:
		reasons = append(reasons, fmt.Sprintf("refused: its subject %s: %v", ref, err))
	case ref.Selector == nil && ref.Name != w.Name:
		reasons = append(reasons, fmt.Sprintf("name: it names %q, not %q", ref.Name, w.Name))
	case ref.Selector != nil && !sel.Matches(labels.Set(w.Labels)):
		reasons = append(reasons, fmt.Sprintf("selector: %s does not match the workload's labels (%s)", selectorString(sel), labelsString(w.Labels)))
	}
	return len(reasons) == 0, reasons
}

// keptOut says what keeps w out of every Binding of b's kind: the
// exclude label on it or its namespace, a namespace of the cluster's
// own, or (from b's Ready condition, since only the Binding's process
// knows its mode) a namespace not included in inclusion mode.
func keptOut(b candidate, w workloadFacts) []string {
	var out []string
	if w.Labels[psbinding.ExcludeLabel] == "true" {
		out = append(out, fmt.Sprintf("exclude label: the workload is labelled %s=true: no Binding acts on it", psbinding.ExcludeLabel))
	}
	switch {
	case w.NamespaceLabels[psbinding.ExcludeLabel] == "true":
		out = append(out, fmt.Sprintf("namespace: %s is labelled %s=true: no Binding acts in it", w.Namespace, psbinding.ExcludeLabel))
	case slices.Contains(psbinding.KubeNamespaces, w.Namespace):
		out = append(out, fmt.Sprintf("namespace: %s is one of the cluster's own (%s): Bindings act there only where their process is configured to", w.Namespace, strings.Join(psbinding.KubeNamespaces, ", ")))
	case b.Ready != nil && (b.Ready.Reason == psbinding.ReasonNamespaceNotIncluded || b.Ready.Reason == psbinding.ReasonNamespaceExcluded):
		out = append(out, "namespace: "+b.Ready.Message)
	}
	return out
}

// standing says where b stands, for a Binding that selects the workload
// and that nothing keeps out: "" when it is in force.
func standing(b candidate) string {
	r := b.Ready
	switch {
	case b.Deleting:
		return "deleted: it is unbinding its subjects"
	case r == nil || b.ObservedGeneration != b.Generation || r.ObservedGeneration != b.Generation:
		return fmt.Sprintf("not yet reconciled: generation %d not yet observed by its controller (is its controller running?)", b.Generation)
	case b.Paused:
		return "paused: no change reaches a subject until it is resumed (kubectl bindkit rollout resume)"
	case b.Undo:
		return "undone: its subjects are brought back to an earlier generation"
	case slices.Contains(failedReasons, r.Reason):
		return "refused: " + r.Reason + ": " + r.Message
	case r.Reason == psbinding.ReasonSubjectKindNotFound || r.Reason == psbinding.ReasonSubjectHasNoPodTemplate:
		return "kind not bound: " + r.Message
	case r.Reason == psbinding.ReasonBoundAtAdmissionOnly:
		return "bound when created only: " + r.Message + "; this workload was not bound at its creation"
	case r.Reason == psbinding.ReasonRolloutHalted:
		return "halted: " + r.Message
	case r.Reason == psbinding.ReasonRollingOut:
		return "rolling out: this workload waits for a wave: " + r.Message
	}
	return ""
}

// kindName is a kind as kubectl spells a type: "deployment.apps".
func kindName(gk schema.GroupKind) string {
	name := strings.ToLower(gk.Kind)
	if gk.Group != "" {
		name += "." + gk.Group
	}
	return name
}

// selectorString is a selector as kubectl's -l takes it.
func selectorString(sel labels.Selector) string {
	if s := sel.String(); s != "" {
		return s
	}
	return "(everything)"
}

// labelsString lists labels, sorted, "none" for none.
func labelsString(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	return labels.Set(l).String()
}
