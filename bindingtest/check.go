package bindingtest

import (
	"encoding/json"
	"fmt"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bindkit/bindkit/duck"
)

// subjectCheck checks the contract on one subject in one layout.
type subjectCheck struct {
	*contract
	s Subject
	// where names the layout in messages: "" for the subject as given,
	// else " (on <layout>)".
	where string
}

// broke reports a broken promise of a category: the first report of a
// category is its text, later ones add their subject.
func (c *subjectCheck) broke(category, format string, args ...any) {
	c.problems.add(category, c.s.Name, fmt.Sprintf(format, args...))
}

// panicked reports a panic of Do or Undo.
func (c *subjectCheck) panicked(p *panicked) {
	c.broke("panic "+p.call, "%s breaks its promise not to panic%s: %v\n  at %s\n"+
		"the framework recovers it, and the Binding is not Ready (BindingPanicked) on such a subject\n"+
		"fix: check for nil maps and pointers and for empty lists before using them",
		p.call, c.where, p.value, p.at)
}

// changesItsBinding, followed by the call, is the category of a Do or
// Undo that changes its Binding.
const changesItsBinding = "changes its binding "

// changesBinding reports a Do or Undo that changed the Binding it was
// given: changed names the fields.
func (c *subjectCheck) changesBinding(call string, changed []string) {
	c.broke(changesItsBinding+call, "%s breaks its promise to leave its Binding alone%s: it changes the Binding it is given:\n  %s\n"+
		"bindkit gives each call a copy of its own, so the change is lost with it: neither Undo nor the next Do sees it\n%s",
		call, c.where, strings.Join(changed, "\n  "),
		c.fix("compute what "+call+" needs in local variables (url := strings.TrimSpace(b.Spec.URL)), and find what Do added in the subject by its name, not by what Do kept in the Binding",
			"compute the Spec in local variables in Declare, and leave the Binding as it is"))
}

// check checks the contract on s in a layout (obj, named lay; "" for s as
// given) and reports whether Do changed it.
func (k *contract) check(s Subject, lay string, obj *unstructured.Unstructured) bool {
	c := &subjectCheck{contract: k, s: s}
	if lay != "" {
		c.where = " on " + lay
	}
	origJSON, err := json.Marshal(obj.Object)
	if err != nil {
		c.broke("subject", "encode subject %s: %v", s.Name, err)
		return false
	}
	before, err := s.Shape.FromUnstructured(obj)
	if err != nil {
		c.broke("subject", "decode subject %s through shape %s: %v", s.Name, s.Shape, err)
		return false
	}
	unboundOK := c.undoUnbound(before)
	after := before.DeepCopy()
	if p := c.do(after); p != nil {
		c.panicked(p)
		return true
	}
	ops := c.createPatch(before, after)
	if len(ops) == 0 {
		return false
	}
	if !c.keepsWhatItHad(before, after) {
		return true // what follows would blame Undo for what Do destroyed
	}
	c.adds(before, after)
	boundJSON, ok := c.applyPatch("Do", obj.Object, origJSON, ops)
	if !ok {
		return true
	}
	bound := decodeJSON(boundJSON)
	reBound, ok := c.patched(origJSON, bound, after, ops)
	if !ok {
		return true
	}
	c.idempotent(reBound)
	if unboundOK && c.restores(before, reBound, bound, boundJSON) && lay == "" {
		c.restoresAfterEdits(obj, &unstructured.Unstructured{Object: bound})
	}
	return true
}

// undoUnbound checks that Undo leaves a subject Do never bound as it is.
func (c *subjectCheck) undoUnbound(before *duck.WithPod) bool {
	undone := before.DeepCopy()
	if p := c.undo(undone); p != nil {
		c.panicked(p)
		return false
	}
	ops := c.createPatch(before, undone)
	if len(ops) == 0 {
		return true
	}
	what := formatChanges(changesOf(c.s.Shape, before, undone), 6, removed, altered, added, moved)
	if what == "" {
		what = formatOpsMax(c.s.Shape, ops, 6)
	}
	c.broke("unbound", "Undo breaks its promise to leave a subject Do never bound as it is%s: Undo of such a subject\n%s\n"+
		"so the reconciler would change every subject it unbinds that was never bound\n"+
		"fix: remove only what Do adds, found by its exact name (or mountPath), not by a prefix, a pattern or a position",
		c.where, what)
	return false
}

// keepsWhatItHad checks that Do removes and changes none of the subject's
// own entries and fields.
func (c *subjectCheck) keepsWhatItHad(before, after *duck.WithPod) bool {
	lost := ofKinds(changesOf(c.s.Shape, before, after), removed, altered, moved)
	if len(lost) == 0 {
		return true
	}
	c.broke("do destroys", "Do breaks its promise to keep what the subject has%s: Do\n%s\n"+
		"Undo cannot give these back, and the workload's owner loses them while it is bound\n%s",
		c.where, formatChanges(lost, 6, removed, altered, moved),
		c.fix("change only the entries Do adds, in place: find each by name and set it, else append it; never rebuild or replace a list or a container",
			"the Spec replaces the workload's entry of the same name (or mountPath): give the Spec's entries names and paths of the Binding's own (a prefix of its kind)"))
	return false
}

// adds checks what Do adds: names, and mounts of volumes the pod has.
func (c *subjectCheck) adds(before, after *duck.WithPod) {
	c.names(before, after)
	if m := unmountable(before, after); m != "" {
		c.broke("mounts", "Do breaks its promise to mount only volumes the pod has%s: %s, but spec.volumes has no volume of that name%s;\n"+
			"the API server refuses such a patch (volumeMounts[].name: Not found)\n%s", c.where, m, ownVolumes(before, after),
			c.fix("mount the volume by the name Do gives it in spec.volumes", "name in the Spec's VolumeMounts a volume of its Volumes"))
	}
	if msg := reachProblem(c.reach, before, after); msg != "" {
		c.broke("reach", "%s%s", msg, c.where)
	}
}

// patched checks that the patched object holds what Do made and kept the
// fields Go's types do not know, and returns it decoded.
func (c *subjectCheck) patched(origJSON []byte, bound map[string]any, after *duck.WithPod, ops []jsonpatch.Operation) (*duck.WithPod, bool) {
	for _, m := range lostUnknownFields(decodeJSON(origJSON), bound) {
		c.broke("unknown field", "Do's patch loses %s (%q)%s, a field Go's types do not know, standing for one a newer API server has\n"+
			"fix: change the fields you bind in place rather than rebuilding or reordering what holds them\npatch:\n%s",
			m.path, m.value, c.where, formatOpsMax(c.s.Shape, ops, 6))
		break
	}
	reBound, err := c.s.Shape.FromUnstructured(&unstructured.Unstructured{Object: bound})
	if err != nil {
		c.broke("patch", "decode the bound subject%s: %v", c.where, err)
		return nil, false
	}
	// The reconciler's view: would it patch the bound subject again to get
	// what Do made? (A Pod's object metadata is its template's: the
	// template's, as Do left it, is compared.)
	want := after
	if len(c.s.Shape.Path()) == 0 {
		want = after.DeepCopy()
		want.Labels, want.Annotations = reBound.Labels, reBound.Annotations
	}
	if again, _ := c.s.Shape.CreatePatch(reBound, want); len(again) > 0 {
		c.broke("patch", "the patched subject is not what Do made%s; what is still to patch:\n%s\npatch of Do:\n%s",
			c.where, formatOpsMax(c.s.Shape, again, 6), formatOpsMax(c.s.Shape, ops, 6))
	}
	return reBound, true
}

// idempotent checks that Do on the subject it bound changes nothing.
func (c *subjectCheck) idempotent(reBound *duck.WithPod) {
	again := reBound.DeepCopy()
	if p := c.do(again); p != nil {
		c.panicked(p)
		return
	}
	if ops := c.createPatch(reBound, again); len(ops) > 0 {
		c.broke("idempotent", "Do breaks its promise to be idempotent%s: on the subject it bound, Do changes it again:\n%s\n"+
			"so the reconciler patches it forever\n"+
			"fix: look for what Do adds (by name) before adding it, and change it in place when it is there",
			c.where, formatOpsMax(c.s.Shape, ops, 6))
	}
}

// restores checks that Undo after Do gives back the subject as it was.
func (c *subjectCheck) restores(before, reBound *duck.WithPod, bound map[string]any, boundJSON []byte) bool {
	unbound := reBound.DeepCopy()
	if p := c.undo(unbound); p != nil {
		c.panicked(p)
		return false
	}
	undoOps := c.createPatch(reBound, unbound)
	restoredJSON, ok := c.applyPatch("Undo", bound, boundJSON, undoOps)
	if !ok {
		return false
	}
	restored, err := c.s.Shape.FromUnstructured(&unstructured.Unstructured{Object: decodeJSON(restoredJSON)})
	if err != nil {
		c.broke("patch", "decode the unbound subject%s: %v", c.where, err)
		return false
	}
	diff := changesOf(c.s.Shape, before, restored)
	if len(diff) == 0 {
		return true
	}
	fix := "fix: remove exactly what Do adds, found by name (or mountPath), everywhere Do adds it (containers, init containers, volumes)"
	if c.restoresOnDosCopy(before, reBound) {
		fix = "Undo runs on a fresh copy of the Binding, as the reconciler reads it back (another reconcile, maybe another process); " +
			"Undo on the copy Do ran on restores, so Undo relies on what Do kept in the Binding (an index, a flag)\n" +
			"fix: find what Do added by its name in the subject, not by what Do remembered"
	}
	c.broke("restore", "Undo breaks its promise to restore the subject Do bound%s: after Do, Undo\n%s\n%s",
		c.where, undoLeft(diff), fix)
	return false
}

// undoLeft describes, one a line, what Undo left of Do's changes (added
// from before to after Undo) and what it took of the subject's own.
func undoLeft(diff []change) string {
	var lines []string
	for _, c := range diff {
		switch c.kind {
		case added:
			lines = append(lines, fmt.Sprintf("  leaves %s, which Do added", c.path))
		case removed:
			lines = append(lines, fmt.Sprintf("  removes %s, the workload's own", c.path))
		case altered:
			lines = append(lines, fmt.Sprintf("  changes the workload's %s from %s to %s", c.path, short(c.before), short(c.after)))
		case moved:
			lines = append(lines, fmt.Sprintf("  reorders the workload's %s", c.path))
		}
	}
	if len(lines) > 6 {
		lines = append(lines[:6], fmt.Sprintf("  and %d more", len(lines)-6))
	}
	return strings.Join(lines, "\n")
}

// restoresOnDosCopy reports whether Undo restores when it runs on the
// copy of the Binding Do ran on: whether Undo relies on state Do kept.
func (c *subjectCheck) restoresOnDosCopy(before, reBound *duck.WithPod) bool {
	b := c.fresh()
	if p, _ := c.call("Do", b, before.DeepCopy()); p != nil {
		return false
	}
	unbound := reBound.DeepCopy()
	if p, _ := c.call("Undo", b, unbound); p != nil {
		return false
	}
	return len(changesOf(c.s.Shape, before, unbound)) == 0
}

// restoresAfterEdits checks that Undo restores a bound subject that its
// owner edited (entries added before and after the Binding's own): Undo
// must find what Do added wherever it now is.
func (c *subjectCheck) restoresAfterEdits(orig, bound *unstructured.Unstructured) {
	want, err1 := c.s.Shape.FromUnstructured(edited(c.s.Shape, orig))
	got, err2 := c.s.Shape.FromUnstructured(edited(c.s.Shape, bound))
	if err1 != nil || err2 != nil {
		return
	}
	if p := c.undo(got); p != nil {
		c.panicked(p)
		return
	}
	if diff := changesOf(c.s.Shape, want, got); len(diff) > 0 {
		c.broke("restore", "Undo breaks its promise to restore the subject Do bound, once the workload's owner added entries before and after the Binding's own "+
			"(env vars USER_FIRST and USER_LAST in every container; volumes, containers and init containers bindingtest-user-first and -last): Undo\n%s\n"+
			"fix: find what Do added by its name, not by its position or a count Do remembered", undoLeft(diff))
	}
}

func (c *subjectCheck) createPatch(before, after *duck.WithPod) []jsonpatch.Operation {
	ops, err := c.s.Shape.CreatePatch(before, after)
	if err != nil {
		c.broke("patch", "create patch%s: %v", c.where, err)
	}
	return ops
}

// applyPatch guards ops against obj as the reconciler does and applies
// them to doc, obj's JSON, with the kube-apiserver's JSON patch
// implementation. It reports a failure and returns false.
func (c *subjectCheck) applyPatch(what string, obj map[string]any, doc []byte, ops []jsonpatch.Operation) ([]byte, bool) {
	if len(ops) == 0 {
		return doc, true
	}
	guarded, err := duck.Guard(obj, ops)
	if err != nil {
		c.broke("patch", "%s: guard the patch%s: %v\npatch:\n%s", what, c.where, err, formatOpsMax(c.s.Shape, ops, 6))
		return nil, false
	}
	body, err := duck.MarshalPatch(guarded)
	if err != nil {
		c.broke("patch", "%s: encode the patch%s: %v", what, c.where, err)
		return nil, false
	}
	patch, err := jsonpatchv4.DecodePatch(body)
	if err != nil {
		c.broke("patch", "%s: the patch does not decode%s: %v\npatch: %s", what, c.where, err, body)
		return nil, false
	}
	out, err := patch.Apply(doc)
	if err != nil {
		c.broke("patch", "%s: the patch does not apply to the subject%s: %v\npatch:\n%s", what, c.where, err, formatOpsMax(c.s.Shape, guarded, 6))
		return nil, false
	}
	return out, true
}

// names reports what Do added to after, beyond before, that has no name or
// a name of the kit's.
func (c *subjectCheck) names(before, after *duck.WithPod) {
	had := map[string]bool{}
	add := func(kind, name string) { had[kind+"/"+name] = true }
	check := func(kind, name string) {
		if had[kind+"/"+name] {
			return
		}
		switch {
		case name == "":
			c.broke("empty name", "Do adds a %s with an empty name: is the Binding's spec filled in? Give CheckContract a Binding whose spec is as a user writes it", kind)
		case strings.HasPrefix(name, KitNamePrefix):
			c.broke("kit name", "Do adds a %s named %q: names beginning with %q are the kit's subjects' own, so the contract check cannot tell the two apart; name it otherwise", kind, name, KitNamePrefix)
		}
	}
	eachName(&before.Spec.Template.Spec, add)
	eachName(&after.Spec.Template.Spec, check)
}

// unmountable describes the first volume mount Do adds whose volume the
// pod spec after Do lacks, or returns "".
func unmountable(before, after *duck.WithPod) string {
	volumes := map[string]bool{}
	for _, v := range after.Spec.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	had := map[string]bool{}
	eachContainer(&before.Spec.Template.Spec, func(kind string, c *corev1.Container) {
		for _, m := range c.VolumeMounts {
			had[kind+c.Name+"\x00"+m.MountPath] = true
		}
	})
	var out string
	eachContainer(&after.Spec.Template.Spec, func(kind string, c *corev1.Container) {
		for _, m := range c.VolumeMounts {
			if out == "" && !volumes[m.Name] && !had[kind+c.Name+"\x00"+m.MountPath] {
				out = fmt.Sprintf("%s %s mounts volume %q at %s", kind, c.Name, m.Name, m.MountPath)
			}
		}
	})
	return out
}

// ownVolumes names the volumes Do adds, for a message: " (Do adds: a, b)".
func ownVolumes(before, after *duck.WithPod) string {
	if own := namesAdded(before, after).volumes; len(own) > 0 {
		return " (Do adds: " + strings.Join(own, ", ") + ")"
	}
	return ""
}

// eachContainer calls f with every init container and container of spec.
func eachContainer(spec *corev1.PodSpec, f func(kind string, c *corev1.Container)) {
	for i := range spec.InitContainers {
		f("init container", &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		f("container", &spec.Containers[i])
	}
}

// formatOpsMax is formatOps of at most max operations, with a count of
// the rest.
func formatOpsMax(shape duck.Shape, ops []jsonpatch.Operation, max int) string {
	if len(ops) <= max {
		return formatOps(shape, ops)
	}
	return formatOps(shape, ops[:max]) + fmt.Sprintf("\n  and %d more", len(ops)-max)
}
