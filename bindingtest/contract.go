package bindingtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
)

// ContractOptions configure CheckContract. The zero value checks a Binding
// whose Do and Undo need no context of their own on Subjects, without an
// API server.
type ContractOptions struct {
	// Subjects are the workloads to bind. Default: Subjects(the Binding's
	// namespace).
	Subjects []Subject
	// WithContext, if set, prepares the context Do and Undo run in, as the
	// framework calls it (wiring.Options.WithContext).
	WithContext psbinding.BindableContext
	// Reach is what Do promises about the subject's containers: that what
	// it adds to one it adds to every one (EveryContainer), init
	// containers too (EveryContainerAndInitContainer). Default: a
	// declarative kind's is what its Spec promises (its env, envFrom and
	// mounts go to every container, and to init containers with
	// InitContainersToo); other kinds promise nothing (ReachUnstated).
	Reach Reach
	// ControlPlane, if set, is the control plane on which CheckContract
	// also checks the built-in subjects the reconciler patches, as Env
	// does, in a subtest ("on the API server") that is skipped, saying
	// what it skipped and how to get the binaries, when they are missing
	// (it fails under CI=true). The checks that need no server run either
	// way. It is started on first use and shared with the package's other
	// tests.
	ControlPlane *envtest.Shared
	// Env, if set, is a control plane on which CheckContract also checks
	// the built-in subjects the reconciler patches (Deployment, StatefulSet,
	// DaemonSet, ReplicaSet, CronJob; bare Pods and Jobs are bound at
	// admission only) as the kube-apiserver stores them: each created
	// in a namespace of its own (the server fills in its defaults:
	// terminationMessagePath, imagePullPolicy, a volume's defaultMode,
	// ...), then bound and unbound with the JSON patches the reconciler
	// sends, which the server validates.
	Env *envtest.Environment
}

// CheckContract checks that b's Do and Undo keep the promises the
// framework relies on, on each subject, the way the reconciler applies
// them: decoded into a *duck.WithPod through the subject's duck.Shape,
// changed by Do or Undo (each call on a fresh copy of b, as the framework
// reads a Binding back from the API server), turned into a JSON patch by
// the shape's CreatePatch, guarded as the reconciler guards it
// (duck.Guard), and applied to the full object by the JSON patch
// implementation the kube-apiserver uses. The promises:
//
//   - Do and Undo leave their Binding alone: neither changes the copy it
//     is given (a Do that trims a URL or completes a list in its spec, an
//     index Do keeps for Undo), the fields named;
//   - Do is deterministic: run on copies of the same subject and Binding,
//     it makes the same pod template (a list built from a Go map is not),
//     also when run again more than a second later (a Do that writes the
//     time, to the second or finer, is caught in every run; one that
//     writes the minute or the day is not): the webhook runs Do at every
//     admitted update of a subject, and a Do whose result changes changes
//     the pod template then, which rolls the workload's pods;
//   - Do does not panic;
//   - Do keeps what the subject has: it removes and changes none of the
//     workload's own entries and fields;
//   - Do's patch applies, the patched object holds what Do made, and
//     fields Go's types do not know (UnknownField) survive it;
//   - Do mounts only volumes the pod spec has, and adds no container,
//     init container, volume or env var without a name (the mark of a
//     Binding whose spec is not filled in) or with a name beginning with
//     KitNamePrefix;
//   - Do reaches every container, as opts.Reach promises;
//   - Do is idempotent: Do on the subject it bound patches nothing;
//   - Undo leaves a subject Do never bound as it is;
//   - Undo restores: Undo after Do gives back the subject as it was
//     before Do, also after the workload's owner added entries before
//     and after the Binding's own.
//
// Besides each subject as given, the promises are checked on two other
// layouts of it: a bare pod template (one container, no annotations, env,
// mounts or volumes), and a crowded one (user env vars, volumes,
// containers and mounts named like those Do adds, a native sidecar, a
// third container).
//
// With opts.Env or opts.ControlPlane set, the same promises are checked
// again on the built-in subjects as the kube-apiserver stores them (see
// ContractOptions.Env), unless a check without the server failed already.
//
// Do running again a second later makes CheckContract take a little over
// a second, once per call, not per subject.
//
// Each broken promise is reported once with t.Errorf at the caller's line:
// which call (Do or Undo) broke which promise, on which subjects and
// layout, the fields by name (template.spec.containers[app].env[LOG_LEVEL])
// and the fix, so that one bug reads as one failure of a few lines. A Do
// that changes none of the subjects fails too, since then the checks
// prove nothing (a Do that needs a context from WithContext sees none
// without it).
func CheckContract(t *testing.T, b psbinding.Bindable, opts ContractOptions) {
	t.Helper()
	failures := contractFailures(t, b, opts)
	for _, f := range failures {
		t.Error(f)
	}
	if opts.ControlPlane == nil || opts.Env != nil || len(failures) > 0 {
		return
	}
	t.Run("on the API server", func(t *testing.T) {
		t.Helper()
		env := serverOrSkip(t, opts.ControlPlane)
		k := newContract(t, b, opts)
		k.onServer(t, env, k.subjects(b, opts))
		for _, f := range k.report(0, false) {
			t.Error(f)
		}
	})
}

// contractFailures checks the contract and returns its failures, each a
// message for t.Error.
func contractFailures(t *testing.T, b psbinding.Bindable, opts ContractOptions) []string {
	t.Helper()
	k := newContract(t, b, opts)
	subjects := k.subjects(b, opts)
	changed, stop := k.serverless(subjects)
	if stop {
		return k.report(0, false)
	}
	// On the server only what the check without one cannot see: a problem
	// found already would be found again, as a second report of one bug.
	if opts.Env != nil && len(k.problems.list) == 0 {
		k.onServer(t, opts.Env, subjects)
	}
	return k.report(changed, len(subjects) > 0)
}

// contract checks one Binding's promises and gathers what it breaks.
type contract struct {
	caller
	name  string // namespace/name of the Binding
	reach Reach
	// declarative is set for a declarative.Declarer, whose fixes are in
	// its Spec, not in Do and Undo.
	declarative bool
	// problems holds each broken promise once, by category.
	problems problemSet
}

func newContract(t *testing.T, b psbinding.Bindable, opts ContractOptions) *contract {
	t.Helper()
	ctx := t.Context()
	if opts.WithContext != nil {
		var err error
		if ctx, err = opts.WithContext(ctx, b); err != nil {
			t.Fatalf("WithContext of binding %s/%s: %v", b.GetNamespace(), b.GetName(), err)
		}
	}
	return &contract{
		caller: caller{ctx: ctx, b: b},
		name:   b.GetNamespace() + "/" + b.GetName(),
		reach:  reachOf(b, opts.Reach),
		declarative: func() bool {
			_, ok := b.(declarative.Declarer)
			return ok
		}(),
	}
}

// fix returns the fix for a kind with Do and Undo of its own, or for a
// declarative kind.
func (k *contract) fix(imperative, declarative string) string {
	if k.declarative {
		return "fix: " + declarative
	}
	return "fix: " + imperative
}

func (k *contract) subjects(b psbinding.Bindable, opts ContractOptions) []Subject {
	if opts.Subjects != nil {
		return opts.Subjects
	}
	return Subjects(b.GetNamespace())
}

// report formats the problems, and when the check proves nothing (no
// subject changed, with some to change) says so.
func (k *contract) report(changed int, hadSubjects bool) []string {
	var out []string
	for _, p := range k.problems.list {
		out = append(out, fmt.Sprintf("binding %s on %s: %s", k.name, joinSubjects(p.subjects), p.text))
	}
	if changed == 0 && hadSubjects && len(out) == 0 {
		out = append(out, fmt.Sprintf("Do of binding %s changed none of the subjects: the contract holds trivially and proves nothing (is the Binding's spec filled in? does Do need ContractOptions.WithContext?)", k.name))
	}
	return out
}

// serverless checks every subject without a server, as given and in each
// layout, and returns how many Do changed as given. A Do that changes its
// Binding, or that is not a function of the Binding and the subject, is
// reported alone (stop): every other check would fail at random, or
// because of it.
func (k *contract) serverless(subjects []Subject) (changed int, stop bool) {
	own, ok := k.deterministic(subjects)
	if !ok {
		return 0, true
	}
	for _, s := range subjects {
		if k.check(s, "", s.Object) {
			changed++
		}
	}
	for _, l := range layouts {
		for _, s := range subjects {
			k.check(s, l.name, l.make(s, own))
		}
	}
	return changed, false
}

// determinismRuns is how many times Do runs on copies of each subject: a
// list built from a Go map of three entries comes out in the same order
// six times in a row rarely, and on every subject almost never.
const determinismRuns = 6

// clockGap is how long after its first runs Do runs again on each
// subject: more than a second, so that a Do that writes the time, to the
// second or finer, writes another one in every run of the check.
const clockGap = 1100 * time.Millisecond

// deterministic runs Do on copies of each subject, and reports a Do that
// changes its Binding, or makes different pod templates of the same
// subject: at once, or clockGap later (a Do that reads the clock). It
// returns what Do adds, by name, for the crowded layout.
func (k *contract) deterministic(subjects []Subject) (ownNames, bool) {
	var own ownNames
	start := time.Now()
	firsts := make([]*duck.WithPod, len(subjects))
	for i, s := range subjects {
		before, err := s.Shape.FromUnstructured(s.Object)
		if err != nil {
			continue // reported by check
		}
		c := &subjectCheck{contract: k, s: s}
		for range determinismRuns {
			wp := before.DeepCopy()
			if c.do(wp) != nil {
				break // reported by check
			}
			if p := k.problems.index[changesItsBinding+"Do"]; p != nil {
				p.text += "\n(the other checks are skipped until Do leaves its Binding alone: Undo may rely on what it kept)"
				return own, false
			}
			if firsts[i] == nil {
				firsts[i] = wp
				if own.empty() {
					own = namesAdded(before, wp)
				}
				continue
			}
			if ops, _ := s.Shape.CreatePatch(firsts[i], wp); len(ops) > 0 {
				k.problems.add("deterministic", s.Name, k.nondeterminism(s.Shape, firsts[i], wp, ops))
				return own, false
			}
		}
	}
	return own, k.sameLater(subjects, firsts, start)
}

// sameLater runs Do again on each subject whose first runs made firsts,
// clockGap after start, and reports a Do whose pod template changed
// meanwhile. It waits only when Do changed a subject.
func (k *contract) sameLater(subjects []Subject, firsts []*duck.WithPod, start time.Time) bool {
	var wait bool
	for i, s := range subjects {
		before, err := s.Shape.FromUnstructured(s.Object)
		wait = wait || (firsts[i] != nil && err == nil && len(k.changedOps(s.Shape, before, firsts[i])) > 0)
	}
	if !wait {
		return true
	}
	select {
	case <-time.After(time.Until(start.Add(clockGap))):
	case <-k.ctx.Done():
		return true // the test is over
	}
	for i, s := range subjects {
		if firsts[i] == nil {
			continue
		}
		wp, _ := s.Shape.FromUnstructured(s.Object)
		if (&subjectCheck{contract: k, s: s}).do(wp) != nil {
			continue // reported by check
		}
		if ops := k.changedOps(s.Shape, firsts[i], wp); len(ops) > 0 {
			k.problems.add("deterministic", s.Name, k.clockDependence(s.Shape, ops))
			return false
		}
	}
	return true
}

// changedOps is the patch from a to b, nil when it cannot be made (check
// reports that).
func (k *contract) changedOps(shape duck.Shape, a, b *duck.WithPod) []jsonpatch.Operation {
	ops, _ := shape.CreatePatch(a, b)
	return ops
}

// rollsPods says what a Do whose result changes from call to call does
// to workloads.
const rollsPods = "so its template changes at every admitted update of a workload, which rolls its pods, and the reconciler patches its subjects again and again"

// clockDependence describes a Do whose result changed in clockGap.
func (k *contract) clockDependence(shape duck.Shape, ops []jsonpatch.Operation) string {
	return fmt.Sprintf("Do breaks its promise to be a function of the Binding and the subject: run again %v later on a copy of the same subject and Binding, it makes another pod template; the patch from the first to the second:\n%s\n"+
		"Do reads the clock (or keeps state between calls), %s\n%s\n(the other checks are skipped until then: each would fail at random)",
		clockGap, formatOpsMax(shape, ops, 6), rollsPods,
		k.fix("take a time from the Binding (its spec, or its status, written once by the controller), never time.Now() in Do",
			"make Declare a function of the Binding alone: a time from its spec, never time.Now()"))
}

func (k *contract) nondeterminism(shape duck.Shape, first, other *duck.WithPod, ops []jsonpatch.Operation) string {
	changes := changesOf(shape, first, other)
	if len(changes) == 0 || len(ofKinds(changes, moved)) < len(changes) {
		return fmt.Sprintf("Do breaks its promise to be deterministic: run on two copies of the same subject and Binding, it makes different pod templates; the patch from one to the other:\n%s\n"+
			"%s\n%s\n(the other checks are skipped until Do is deterministic: each would fail at random)", formatOpsMax(shape, ops, 6), rollsPods,
			k.fix("make Do a function of the Binding and the subject alone (no clock, no random, no state kept between calls)",
				"make Declare a function of the Binding alone (no clock, no random, no state kept between calls)"))
	}
	var lines []string
	for _, c := range changes[:min(len(changes), 4)] {
		lines = append(lines, fmt.Sprintf("  %s: %s in one run, %s in the other", c.path,
			strings.Join(c.before.([]string), ", "), strings.Join(c.after.([]string), ", ")))
	}
	who := "Do"
	if k.declarative {
		who = "Declare"
	}
	return fmt.Sprintf("Do breaks its promise to be deterministic: run on two copies of the same subject and Binding, it orders entries differently:\n%s\n"+
		"%s builds a list by ranging over a Go map, whose order changes from run to run, so the reconciler patches the subject again and again\n"+
		"fix: range over the map's keys in order (slices.Sorted(maps.Keys(m)))\n"+
		"(the other checks are skipped until Do is deterministic: each would fail at random)", strings.Join(lines, "\n"), who)
}

// changesOf returns the changes from a to b, subjects of shape: the
// object's labels and annotations and the pod template, by name. A Pod's
// metadata is its template's, compared once.
func changesOf(shape duck.Shape, a, b *duck.WithPod) []change {
	view := func(wp *duck.WithPod) map[string]any {
		if len(shape.Path()) == 0 {
			return map[string]any{"template": &wp.Spec.Template}
		}
		return map[string]any{
			"metadata": map[string]any{"labels": wp.Labels, "annotations": wp.Annotations},
			"template": &wp.Spec.Template,
		}
	}
	var out []change
	diffTree("", "", toTree(view(a)), toTree(view(b)), &out)
	return out
}

func (o ownNames) empty() bool {
	return len(o.env)+len(o.volumes)+len(o.containers)+len(o.mountPaths) == 0
}

// problemSet gathers the problems of every subject: each category once,
// with the text first seen, naming every subject it was seen on.
type problemSet struct {
	list  []*problem
	index map[string]*problem
}

type problem struct {
	text     string
	subjects []string
}

func (ps *problemSet) add(category, subject, text string) {
	if ps.index == nil {
		ps.index = map[string]*problem{}
	}
	p, ok := ps.index[category]
	if !ok {
		p = &problem{text: text}
		ps.index[category] = p
		ps.list = append(ps.list, p)
	}
	if !slices.Contains(p.subjects, subject) {
		p.subjects = append(p.subjects, subject)
	}
}

// joinSubjects names the subjects a problem was seen on: in full up to
// three, else by kind.
func joinSubjects(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	kinds := make([]string, len(names))
	for i, n := range names {
		kinds[i] = n[strings.LastIndex(n, " ")+1:]
	}
	return fmt.Sprintf("%d subjects (%s)", len(names), strings.Join(kinds, ", "))
}

// eachName calls f with every named thing of spec a Binding may add.
func eachName(spec *corev1.PodSpec, f func(kind, name string)) {
	for _, list := range []struct {
		kind string
		cs   []corev1.Container
	}{{"init container", spec.InitContainers}, {"container", spec.Containers}} {
		for _, ctr := range list.cs {
			f(list.kind, ctr.Name)
			for _, e := range ctr.Env {
				f("env var in "+list.kind+" "+ctr.Name, e.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		f("volume", v.Name)
	}
}

// withoutEmpty drops, recursively, the object members whose value is null
// or an empty list, and labels and annotations that are empty maps: what
// Go's omitempty fields and the API server make of "none".
func withoutEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			l, isList := child.([]any)
			m, isMap := child.(map[string]any)
			if child == nil || (isList && len(l) == 0) || (isMap && len(m) == 0 && (k == "labels" || k == "annotations")) {
				delete(v, k)
				continue
			}
			v[k] = withoutEmpty(child)
		}
	case []any:
		for i := range v {
			v[i] = withoutEmpty(v[i])
		}
	}
	return v
}

// decodeJSON decodes what json.Marshal or a JSON patch made.
func decodeJSON(data []byte) map[string]any {
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("bindingtest: decode JSON this package encoded: %v", err))
	}
	return out
}

// formatOps writes one operation a line, its path relative to the pod
// template (templatePath) so that one problem reads the same on every
// shape.
func formatOps(shape duck.Shape, ops []jsonpatch.Operation) string {
	if len(ops) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, op := range ops {
		value, _ := json.Marshal(op.Value)
		fmt.Fprintf(&b, "  %s %s %s\n", op.Operation, templatePath(shape, op.Path), value)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// marker is an UnknownField found in an object.
type marker struct {
	path  string // for messages: spec.template.spec.containers[bindingtest-app].bindkitTestUnknownField
	steps []step
	value any
}

// step is one step of a path: a map key, or a list element found by its
// "name" (pod spec lists are keyed by name, and Do may insert before an
// element) or, without one, by its index.
type step struct {
	key   string
	name  string
	index int
	list  bool
}

// lostUnknownFields returns the UnknownField markers of before that after
// lacks while it still has what held them.
func lostUnknownFields(before, after map[string]any) []marker {
	var lost []marker
	for _, m := range markers(before, nil, "") {
		parent, ok := resolve(after, m.steps[:len(m.steps)-1])
		if !ok {
			continue // Do removed what held it
		}
		obj, _ := parent.(map[string]any)
		if v, found := obj[UnknownField]; !found || v != m.value {
			lost = append(lost, m)
		}
	}
	return lost
}

func markers(v any, steps []step, path string) []marker {
	var out []marker
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			s := append(append([]step(nil), steps...), step{key: k})
			p := strings.TrimPrefix(path+"."+k, ".")
			if k == UnknownField {
				out = append(out, marker{path: p, steps: s, value: child})
				continue
			}
			out = append(out, markers(child, s, p)...)
		}
	case []any:
		for i, child := range v {
			st := step{list: true, index: i}
			label := strconv.Itoa(i)
			if m, ok := child.(map[string]any); ok {
				if name, ok := m["name"].(string); ok && name != "" {
					st.name, label = name, name
				}
			}
			out = append(out, markers(child, append(append([]step(nil), steps...), st), path+"["+label+"]")...)
		}
	}
	return out
}

func resolve(v any, steps []step) (any, bool) {
	for _, s := range steps {
		switch {
		case s.list:
			list, ok := v.([]any)
			if !ok {
				return nil, false
			}
			found := false
			for i, item := range list {
				m, _ := item.(map[string]any)
				if (s.name != "" && m["name"] == s.name) || (s.name == "" && i == s.index) {
					v, found = item, true
					break
				}
			}
			if !found {
				return nil, false
			}
		default:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[s.key]; !ok {
				return nil, false
			}
		}
	}
	return v, true
}
