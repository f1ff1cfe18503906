package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// TestWhyNotSaysWhyABindingDoesNotApply decides, for Bindings of each
// kind of reference and state, whether one selects a Deployment
// (app=web) and why it does not apply.
func TestWhyNotSaysWhyABindingDoesNotApply(t *testing.T) {
	deployments := func(sel map[string]string, name string) *tracker.Reference {
		r := &tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
		if sel != nil {
			r.Selector = &metav1.LabelSelector{MatchLabels: sel}
		}
		return r
	}
	web := map[string]string{"app": "web"}
	ready := func(status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: msg, ObservedGeneration: 2}
	}
	inForce := func(c candidate) candidate {
		c.Name, c.Namespace, c.Generation, c.ObservedGeneration = "b", "shop", 2, 2
		if c.Ready == nil {
			c.Ready = ready(metav1.ConditionTrue, "BindingAvailable", "")
		}
		return c
	}
	workload := workloadFacts{Kind: schema.GroupKind{Group: "apps", Kind: "Deployment"}, Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}, NamespaceLabels: map[string]string{}}
	excluded := workload
	excluded.Labels = map[string]string{"app": "web", psbinding.ExcludeLabel: "true"}
	excludedNS := workload
	excludedNS.NamespaceLabels = map[string]string{psbinding.ExcludeLabel: "true"}
	kubeNS := workload
	kubeNS.Namespace = "kube-system"
	for _, tc := range []struct {
		name    string
		b       candidate
		w       workloadFacts
		selects bool
		reasons []string
	}{
		{"a selector that does not match", inForce(candidate{Subject: deployments(map[string]string{"app": "api"}, "")}), workload, false,
			[]string{"selector: app=api does not match the workload's labels (app=web,tier=front)"}},
		{"a selector that does not match, on a workload labelled out", inForce(candidate{Subject: deployments(map[string]string{"app": "api"}, "")}), excluded, false,
			[]string{"selector: app=api does not match the workload's labels (app=web,bindings.bindkit.dev/exclude=true)"}},
		{"another name", inForce(candidate{Subject: deployments(nil, "db")}), workload, false, []string{`name: it names "db", not "web"`}},
		{"another kind", inForce(candidate{Subject: &tracker.Reference{APIVersion: "apps/v1", Kind: "StatefulSet", Selector: &metav1.LabelSelector{MatchLabels: web}}}), workload, false,
			[]string{"kind not bound: it binds statefulset.apps, not deployment.apps"}},
		{"another namespace", inForce(candidate{Subject: &tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "web"}}), workload, false,
			[]string{`refused: subject namespace "other" is not the binding's namespace "shop": binding shop/b may only bind subjects in namespace "shop"`}},
		{"no subject", inForce(candidate{}), workload, false, []string{"its subject cannot be read: no subject reference at spec.subject"}},
		{"the workload's exclude label", inForce(candidate{Subject: deployments(web, "")}), excluded, true,
			[]string{"exclude label: the workload is labelled bindings.bindkit.dev/exclude=true: no Binding acts on it"}},
		{"the namespace's exclude label", inForce(candidate{Subject: deployments(web, "")}), excludedNS, true,
			[]string{"namespace: shop is labelled bindings.bindkit.dev/exclude=true: no Binding acts in it"}},
		{"a namespace of the cluster's own", func() candidate {
			c := inForce(candidate{Subject: deployments(web, "")})
			c.Namespace = "kube-system"
			return c
		}(), kubeNS, true,
			[]string{"namespace: kube-system is one of the cluster's own (kube-system, kube-public, kube-node-lease): Bindings act there only where their process is configured to"}},
		{"inclusion mode", inForce(candidate{Subject: deployments(web, ""), Ready: ready("False", psbinding.ReasonNamespaceNotIncluded, "namespace shop is not labelled bindings.bindkit.dev/include=true: in inclusion mode Bindings act only in namespaces that opt in")}), workload, true,
			[]string{"namespace: namespace shop is not labelled bindings.bindkit.dev/include=true: in inclusion mode Bindings act only in namespaces that opt in"}},
		{"paused", inForce(candidate{Subject: deployments(web, ""), Paused: true, Ready: ready("False", psbinding.ReasonRolloutPaused, "paused")}), workload, true,
			[]string{"paused: no change reaches a subject until it is resumed (kubectl bindkit rollout resume)"}},
		{"not yet reconciled", func() candidate { c := inForce(candidate{Subject: deployments(web, "")}); c.Generation = 3; return c }(), workload, true,
			[]string{"not yet reconciled: generation 3 not yet observed by its controller (is its controller running?)"}},
		{"refused", inForce(candidate{Subject: deployments(web, ""), Ready: ready("False", psbinding.ReasonBindingInvalid, "spec.env[0].name: Required value")}), workload, true,
			[]string{"refused: BindingInvalid: spec.env[0].name: Required value"}},
		{"halted", inForce(candidate{Subject: deployments(web, ""), Ready: ready("False", psbinding.ReasonRolloutHalted, "rollout of generation 2 halted at wave 1")}), workload, true,
			[]string{"halted: rollout of generation 2 halted at wave 1"}},
		{"in force, not bound yet", inForce(candidate{Subject: deployments(web, "")}), workload, true,
			[]string{"it selects the workload and nothing keeps it out: its controller has not bound it yet (Ready True, BindingAvailable: )"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			selects, reasons := whyNot(tc.b, tc.w)
			if selects != tc.selects {
				t.Errorf("selects %v, want %v", selects, tc.selects)
			}
			if diff := cmp.Diff(tc.reasons, reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrintWhyOfAnUndoneWorkload: a workload undone to generation 1 of a
// Binding now at generation 2 is shown carrying generation 1's values
// (its spec from the rollout history, the values of its pod template),
// beside what generation 2 adds; not generation 2's values as its own.
func TestPrintWhyOfAnUndoneWorkload(t *testing.T) {
	v1 := json.RawMessage(`{"sink":"https://sink.example.com/v1","subject":{"apiVersion":"apps/v1","kind":"Deployment","selector":{"matchLabels":{"app":"web"}}}}`)
	v2 := json.RawMessage(`{"sink":"https://sink.example.com/v2","subject":{"apiVersion":"apps/v1","kind":"Deployment","selector":{"matchLabels":{"app":"web"}}}}`)
	history, _ := json.Marshal([]psbinding.HistoryEntry{{Generation: 1, Spec: v1}})
	spec, from := carriedSpec(map[string]string{psbinding.RolloutHistoryAnnotation: string(history)}, 2, v2, 1)
	if from != carriedFromHistory || string(spec) != string(v1) {
		t.Fatalf("carriedSpec: %s from %q, want generation 1's from the history", spec, from)
	}
	declared := &declarative.Spec{Env: []corev1.EnvVar{{Name: "K_SINK", Value: "https://sink.example.com/v2"}}}
	pod := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "K_SINK", Value: "https://sink.example.com/v1"}}}}}
	e := whyEntry{Binding: "sinkbinding.bindings.bindkit.dev/sink", Recorded: 1, Current: 2, State: stateUndone, Reason: "RolloutUndone",
		Message: "generation 2 undone: every subject carries generation 1", RequestedBy: "alice",
		CarriedSpec: spec, CarriedFrom: from, SpecChanges: specChanges(spec, v2),
		Carries: templateValues(declared, pod), Adds: adds(declared), AddsOf: 2}
	var out bytes.Buffer
	if err := printWhy(&out, whyView{Workload: "deployment.apps/app-000", Namespace: "shop", Bindings: []whyEntry{e}}); err != nil {
		t.Fatal(err)
	}
	want := `deployment.apps/app-000 (namespace shop) records 1 Binding:

BINDING                                CARRIES  CURRENT  STATE   REASON
sinkbinding.bindings.bindkit.dev/sink  1        2        undone  RolloutUndone

sinkbinding.bindings.bindkit.dev/sink:
  requested by alice (the last to create it or change its spec)
  carries generation 1; its spec (from the rollout history) and generation 2's differ in: sink: https://sink.example.com/v1 -> https://sink.example.com/v2
  carries in its pod template: env K_SINK=https://sink.example.com/v1
  generation 2 adds: env K_SINK=https://sink.example.com/v2
  generation 2 undone: every subject carries generation 1
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("why (-want +got):\n%s", diff)
	}
}

// TestPrintWhyOfAWorkloadNoBindingRecords lists each Binding of the
// namespace and why it does not apply.
func TestPrintWhyOfAWorkloadNoBindingRecords(t *testing.T) {
	v := whyView{Workload: "deployment.apps/web", Namespace: "shop", Bindings: []whyEntry{}, NotApplied: []whyNotEntry{
		{Binding: "sinkbinding.bindings.bindkit.dev/api", Reasons: []string{"selector: app=api does not match the workload's labels (app=web)"}},
		{Binding: "sinkbinding.bindings.bindkit.dev/web", Selects: true, Reasons: []string{"exclude label: the workload is labelled bindings.bindkit.dev/exclude=true: no Binding acts on it"}, RequestedBy: "bob"},
	}, Unread: []string{"configbindings.bindings.bindkit.dev: forbidden"}}
	var out bytes.Buffer
	if err := printWhy(&out, v); err != nil {
		t.Fatal(err)
	}
	want := `deployment.apps/web (namespace shop): no Binding records it

The Bindings of namespace shop, and why each does not apply:

sinkbinding.bindings.bindkit.dev/api does not select it:
  selector: app=api does not match the workload's labels (app=web)

sinkbinding.bindings.bindkit.dev/web selects it:
  exclude label: the workload is labelled bindings.bindkit.dev/exclude=true: no Binding acts on it
  requested by bob

Not read (these kinds' Bindings are not listed above):
  configbindings.bindings.bindkit.dev: forbidden
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("why (-want +got):\n%s", diff)
	}
	out.Reset()
	if err := printWhy(&out, whyView{Workload: "deployment.apps/web", Namespace: "shop", Bindings: []whyEntry{}}); err != nil {
		t.Fatal(err)
	}
	if want := "deployment.apps/web (namespace shop): no Binding records it\n\nNo Binding (kubectl's \"bindings\" category) is in namespace shop.\n"; out.String() != want {
		t.Errorf("why of a namespace without Bindings:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestSpecChangesAndTemplateValues: the fields two specs differ in, and
// what a pod template holds of a declared Spec.
func TestSpecChangesAndTemplateValues(t *testing.T) {
	got := specChanges(json.RawMessage(`{"sink":"a","list":[1,2],"same":true}`), json.RawMessage(`{"sink":"b","list":[1],"same":true,"forwarderImage":"img"}`))
	want := []string{"forwarderImage: (none) -> img", "list[1]: 2 -> (none)", "sink: a -> b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("specChanges (-want +got):\n%s", diff)
	}
	s := &declarative.Spec{
		Env:        []corev1.EnvVar{{Name: "K_SINK", Value: "x"}, {Name: "K_CA", Value: "y"}},
		Volumes:    []corev1.Volume{{Name: "certs"}},
		Containers: []corev1.Container{{Name: "forwarder", Image: "new"}},
	}
	pod := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{{Name: "K_CA", ValueFrom: &corev1.EnvVarSource{}}}}},
		Containers:     []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "K_SINK", Value: "old"}}}, {Name: "forwarder", Image: "old"}},
	}
	if diff := cmp.Diff([]string{"env K_SINK=old", "env K_CA=(from a source)", "volume certs (absent)", "container forwarder (old)"}, templateValues(s, pod)); diff != "" {
		t.Errorf("templateValues (-want +got):\n%s", diff)
	}
}
