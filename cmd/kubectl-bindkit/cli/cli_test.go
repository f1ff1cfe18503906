package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/psbinding"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
)

// TestExitStatusesOfTheCommandLine: help is 0, a wrong command line 2
// (with what is wrong on stderr), a kubeconfig that cannot be read 1.
func TestExitStatusesOfTheCommandLine(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		name       string
		args       []string
		want       int
		wantStderr string
		wantStdout string
	}{
		{"no command", nil, ExitUsage, "", "Commands:"},
		{"help", []string{"--help"}, ExitOK, "", "Exit status:"},
		{"help of a command", []string{"help", "plan"}, ExitOK, "", "kubectl bindkit plan TYPE/NAME"},
		{"a command's --help", []string{"rollout", "--help"}, ExitOK, "", "-n, --namespace string"},
		{"kubectl's connection flags in a command's --help", []string{"why", "-h"}, ExitOK, "", "--request-timeout string"},
		{"unknown command", []string{"diff"}, ExitUsage, `unknown command "diff"`, ""},
		{"kubectl's flags before the command", []string{"--kubeconfig", "/nonexistent", "-n", "x", "diff"}, ExitUsage, `unknown command "diff"`, ""},
		{"unknown flag", []string{"plan", "--bogus"}, ExitUsage, "unknown flag: --bogus", ""},
		{"bad output", []string{"why", "deployment/web", "-o", "wide"}, ExitUsage, `--output "wide": want table, json or yaml`, ""},
		{"no such kubeconfig", []string{"plan", "sinkbinding/sink", "--kubeconfig", missing}, ExitError, "kubeconfig", ""},
		{"rollout without a verb", []string{"rollout", "--kubeconfig", missing}, ExitUsage, "rollout: want status, pause, resume or undo", ""},
		{"rollout with an unknown verb", []string{"rollout", "restart", "sinkbinding/sink"}, ExitUsage, `unknown verb "restart"`, ""},
		{"plan of two objects", []string{"plan", "sinkbinding/a", "sinkbinding/b"}, ExitUsage, "want one Binding as TYPE/NAME", ""},
		{"audit with an argument", []string{"audit", "shop"}, ExitUsage, "audit takes no arguments", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := Main(context.Background(), tc.args, &stdout, &stderr); got != tc.want {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", got, tc.want, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) || !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout %q, stderr %q; want %q and %q in them", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// TestFlagsGoAnywhereOnTheLine: kubectl's way, "rollout pause sink -n ns"
// as well as "-n ns rollout pause sink", "--" ending the flags, and
// kubectl's connection flags read into the ConfigFlags.
func TestFlagsGoAnywhereOnTheLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ns   string
		want []string
	}{
		{[]string{"pause", "sinkbinding/sink", "-n", "shop"}, "shop", []string{"pause", "sinkbinding/sink"}},
		{[]string{"-n=shop", "pause", "sinkbinding", "sink"}, "shop", []string{"pause", "sinkbinding", "sink"}},
		{[]string{"pause", "--namespace", "shop", "x/y"}, "shop", []string{"pause", "x/y"}},
		{[]string{"pause", "--", "-n", "x"}, "", []string{"pause", "-n", "x"}},
		{[]string{"--as", "bob", "--request-timeout=1s", "status", "x/y", "-w=false"}, "", []string{"status", "x/y"}},
	} {
		o := &options{}
		fs, _, _ := rolloutCommand().flagSets(o)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if diff := cmp.Diff(tc.want, fs.Args()); diff != "" || *o.config.Namespace != tc.ns {
			t.Errorf("%q: namespace %q, want %q; arguments (-want +got):\n%s", tc.args, *o.config.Namespace, tc.ns, diff)
		}
	}
	o := &options{}
	fs, _, _ := whyCommand().flagSets(o)
	args := []string{"deployment/web", "--as=bob", "--as-group", "devs", "--request-timeout", "1s", "-s", "https://127.0.0.1:1", "--token", "t", "--insecure-skip-tls-verify", "--context", "c", "--kubeconfig", "k"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c := o.config
	got := []string{*c.Impersonate, strings.Join(*c.ImpersonateGroup, ","), *c.Timeout, *c.APIServer, *c.BearerToken, fmt.Sprint(*c.Insecure), *c.Context, *c.KubeConfig}
	if diff := cmp.Diff([]string{"bob", "devs", "1s", "https://127.0.0.1:1", "t", "true", "c", "k"}, got); diff != "" {
		t.Errorf("connection flags (-want +got):\n%s", diff)
	}
}

// TestPatchLinesReadLikeADiff renders each operation of a plan's patch on
// a line: + for add, - for remove, ~ for replace.
func TestPatchLinesReadLikeADiff(t *testing.T) {
	for _, tc := range []struct {
		patch string
		want  []string
	}{
		{`[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"K_SINK","value":"https://x"}]}]`,
			[]string{`+ /spec/template/spec/containers/0/env: [{"name":"K_SINK","value":"https://x"}]`}},
		{`[{"op":"remove","path":"/spec/template/spec/containers/1"},{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"https://y"}]`,
			[]string{"- /spec/template/spec/containers/1", `~ /spec/template/spec/containers/0/env/0/value: "https://y"`}},
		{`[]`, []string{"(no change to the pod template: only bindkit's records)"}},
		{`[{"op":"add","path":"/a"`, []string{`[{"op":"add","path":"/a"`}},
	} {
		if diff := cmp.Diff(tc.want, patchLines(tc.patch)); diff != "" {
			t.Errorf("patchLines(%s) (-want +got):\n%s", tc.patch, diff)
		}
	}
}

// TestPrintPlan prints a plan of two waves, two changes and what it
// leaves out.
func TestPrintPlan(t *testing.T) {
	var out bytes.Buffer
	err := printPlan(&out, planView{Binding: "sinkbinding.bindings.bindkit.dev/sink", Namespace: "shop", Generation: 2, Plan: &duck.PlanStatus{
		Generation: 2, Total: 5, Bind: 3, Unbind: 1, Unchanged: 1,
		Waves: []duck.PlanWave{{Number: 3, Count: 2, Subjects: []string{"a", "b"}}, {Number: 4, Count: 2, Subjects: []string{"c", "d"}}},
		Changes: []duck.PlanChange{
			{Action: "bind", Count: 3, Subjects: []string{"a", "b", "c"}, Patch: `[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"https://v2"}]`},
			{Action: "unbind", Count: 1, Subjects: []string{"d"}, Patch: `[{"op":"remove","path":"/spec/template/spec/containers/0/env"}]`},
		},
		NotRead: 7, Errors: []duck.SubjectReason{{Name: "e", Reason: "Do panicked: boom"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `sinkbinding.bindings.bindkit.dev/sink (namespace shop) is paused. Resuming it rolls out generation 2:
  5 subjects selected: 3 to bind, 1 to unbind, 1 unchanged
  4 template changes, 0 records only

WAVE  SUBJECTS  NAMES
3     2         a, b
4     2         c, d

bind 3 subjects: a, b, c
  ~ /spec/template/spec/containers/0/env/0/value: "https://v2"

unbind 1 subject: d
  - /spec/template/spec/containers/0/env

7 more subjects not read: the plan shows the first 100

error: e: Do panicked: boom

kubectl bindkit rollout resume sinkbinding.bindings.bindkit.dev/sink -n shop applies it.
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestPlanCountsTemplateChangesApartFromRecords: a change whose patch is
// "[]" changes records only; plan says so and exits 0 when no template
// changes, 3 when one does or the plan does not show every change.
func TestPlanCountsTemplateChangesApartFromRecords(t *testing.T) {
	template := `[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[]}]`
	for _, tc := range []struct {
		name string
		plan duck.PlanStatus
		want planCounts
		line string
		code int
	}{
		{"records only", duck.PlanStatus{Total: 40, Bind: 40, Changes: []duck.PlanChange{{Action: "bind", Count: 40, Patch: "[]"}}},
			planCounts{RecordsOnly: 40}, "0 template changes, 40 records only", ExitOK},
		{"both", duck.PlanStatus{Total: 41, Bind: 41, Changes: []duck.PlanChange{{Action: "bind", Count: 40, Patch: "[]"}, {Action: "bind", Count: 1, Patch: template}}},
			planCounts{Template: 1, RecordsOnly: 40}, "1 template change, 40 records only", ExitChanges},
		{"not all read", duck.PlanStatus{Total: 140, Bind: 140, NotRead: 40, Changes: []duck.PlanChange{{Action: "bind", Count: 100, Patch: "[]"}}},
			planCounts{RecordsOnly: 100, Unknown: 40}, "0 template changes, 100 records only, 40 not shown", ExitChanges},
		{"a truncated patch counts as a template change", duck.PlanStatus{Total: 1, Bind: 1, Changes: []duck.PlanChange{{Action: "bind", Count: 1, Patch: "[", Truncated: true}}},
			planCounts{Template: 1}, "1 template change, 0 records only", ExitChanges},
		{"nothing", duck.PlanStatus{Total: 3, Unchanged: 3}, planCounts{}, "0 template changes, 0 records only", ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := countPlan(&tc.plan)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("countPlan (-want +got):\n%s", diff)
			}
			var out bytes.Buffer
			if err := printPlan(&out, planView{Binding: "b", Namespace: "ns", Plan: &tc.plan}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "\n  "+tc.line+"\n") {
				t.Errorf("plan printed no line %q:\n%s", tc.line, out.String())
			}
			if code := planExit(&tc.plan); code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
		})
	}
}

// TestRolloutViewOfEachState reads where a rollout stands from a
// Binding's Ready condition, and which exit status it ends with.
func TestRolloutViewOfEachState(t *testing.T) {
	paused := map[string]any{psbinding.RolloutPausedAnnotation: "true"}
	undo := map[string]any{psbinding.RolloutUndoAnnotation: "2"}
	for _, tc := range []struct {
		reason, status string
		annotations    map[string]any
		state          string
		end            bool
		code           int
	}{
		{"BindingAvailable", "True", nil, stateComplete, true, ExitOK},
		{"RollingOut", "False", nil, stateRollingOut, false, ExitChanges},
		{"RolloutPaused", "False", paused, statePaused, true, ExitPaused},
		{"RolloutPaused", "False", nil, statePending, false, ExitChanges}, // resumed, not reconciled yet
		{"RolloutHalted", "False", nil, stateHalted, true, ExitHalted},
		{"UndoingRollout", "False", undo, stateUndoing, false, ExitChanges},
		{"RolloutUndone", "False", undo, stateUndone, true, ExitOK},
		{"RolloutUndone", "False", nil, statePending, false, ExitChanges}, // the undo taken back, not reconciled yet
		{"UndoUnavailable", "False", nil, stateFailed, true, ExitError},
		{"SubjectPatchFailed", "False", nil, stateNotReady, false, ExitChanges},
	} {
		b := bindingObject(3, 3, tc.reason, tc.status)
		if tc.annotations != nil {
			b.u.Object["metadata"].(map[string]any)["annotations"] = tc.annotations
		}
		v := viewOf(b)
		end, code := v.done()
		if v.State != tc.state || end != tc.end || code != tc.code {
			t.Errorf("Ready %s %s, annotations %v: state %q, end %v, exit %d; want %q, %v, %d", tc.status, tc.reason, tc.annotations, v.State, end, code, tc.state, tc.end, tc.code)
		}
	}
	if v := viewOf(bindingObject(4, 3, "BindingAvailable", "True")); v.State != statePending {
		t.Errorf("a generation not observed yet: state %q, want %q", v.State, statePending)
	}

	// An undo of the current generation the controller has not reconciled
	// yet: the status still speaks of the halted rollout it undoes.
	for _, tc := range []struct {
		name, reason string
		undoneFrom   int64
		state        string
	}{
		{"halted, the undo not seen yet", "RolloutHalted", 0, statePending},
		{"complete, the undo not seen yet", "BindingAvailable", 0, statePending},
		{"undoing", "UndoingRollout", 3, stateUndoing},
		{"undone", "RolloutUndone", 3, stateUndone},
		{"nothing to undo to", "UndoUnavailable", 0, stateFailed},
	} {
		status := "False"
		if tc.reason == "BindingAvailable" {
			status = "True"
		}
		b := bindingObject(3, 3, tc.reason, status)
		b.u.Object["metadata"].(map[string]any)["annotations"] = map[string]any{psbinding.RolloutUndoAnnotation: "3"}
		if tc.undoneFrom > 0 {
			b.u.Object["status"].(map[string]any)["rollout"] = map[string]any{"generation": int64(2), "undoneFrom": tc.undoneFrom}
		}
		if v := viewOf(b); v.State != tc.state {
			t.Errorf("%s: state %q, want %q", tc.name, v.State, tc.state)
		}
	}
}

// bindingObject is a SinkBinding at generation whose status describes
// observed, with a Ready condition of status and reason.
func bindingObject(generation, observed int64, reason, status string) *object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bindings.bindkit.dev/v1alpha1", "kind": "SinkBinding",
		"metadata": map[string]any{"namespace": "shop", "name": "sink", "generation": generation},
		"status": map[string]any{"observedGeneration": observed, "conditions": []any{map[string]any{
			"type": "Ready", "status": status, "reason": reason, "message": "m", "observedGeneration": observed, "lastTransitionTime": "2026-11-26T12:00:00Z"}}},
	}}
	return &object{kind: schema.GroupVersionKind{Group: "bindings.bindkit.dev", Version: "v1alpha1", Kind: "SinkBinding"}, u: u}
}

func TestCommandFirst(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{[]string{"plan", "sinkbinding/s"}, []string{"plan", "sinkbinding/s"}},
		{[]string{"--kubeconfig", "k", "-n", "ns", "plan", "sinkbinding/s"}, []string{"plan", "--kubeconfig", "k", "-n", "ns", "sinkbinding/s"}},
		{[]string{"--kubeconfig=k", "-A", "audit"}, []string{"audit", "--kubeconfig=k", "-A"}},
		{[]string{"--as", "bob", "--request-timeout", "1s", "-s", "https://x", "why", "d/w"}, []string{"why", "--as", "bob", "--request-timeout", "1s", "-s", "https://x", "d/w"}},
		{[]string{"--insecure-skip-tls-verify", "why", "d/w"}, []string{"why", "--insecure-skip-tls-verify", "d/w"}},
		{[]string{"--help"}, []string{"--help"}},
	} {
		if diff := cmp.Diff(tc.want, commandFirst(tc.args)); diff != "" {
			t.Errorf("commandFirst(%q) (-want +got):\n%s", tc.args, diff)
		}
	}
}
