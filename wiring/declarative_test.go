package wiring_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

var sinkBindings = injectiontest.Resource{
	Kind:       sinkv1alpha1.SchemeGroupVersion.WithKind(sinkv1alpha1.Kind),
	Resource:   sinkv1alpha1.Resource,
	Namespaced: true,
}

// TestDeclarativeKindChoosesItsAdmission checks how a declarative kind is
// admitted: by policy only when the process allows it and the
// kube-apiserver serves MutatingAdmissionPolicy v1, by the webhook
// otherwise, saying which and why (by policy, the webhook serves until the
// policy is seen in force); a kind that writes its own Do is always
// admitted by the webhook.
func TestDeclarativeKindChoosesItsAdmission(t *testing.T) {
	served := []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "mutatingwebhookconfigurations"}, {Name: "mutatingadmissionpolicies"}, {Name: "mutatingadmissionpolicybindings"}}}}
	notServed := []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "mutatingwebhookconfigurations"}}}}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		admission policy.Admission
		wantLog   string
	}{
		{"served, default", served, "", "admission by MutatingAdmissionPolicy"},
		{"served, webhook chosen", served, policy.ByWebhook, "admission by webhook: the process admits declarative kinds by webhook (--declarative-admission=webhook)"},
		{"not served", notServed, policy.ByPolicy, "admission by webhook: the kube-apiserver does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, err := wiring.New[sinkv1alpha1.SinkBinding](sinkv1alpha1.GroupVersionResource(), wiring.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !kind.Declarative {
				t.Fatal("SinkBinding is not recognised as declarative")
			}
			core, logs := observer.New(zap.InfoLevel)
			ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{sinkBindings}, Logger: zap.New(core)},
				installedConfig(kind.WebhookConfigurationName))
			fakes.Kube.Resources = tc.resources
			ctx = webhook.WithOptions(injection.WithSystemNamespace(ctx, "bindkit-system"), webhook.Options{DeclarativeByWebhook: tc.admission == policy.ByWebhook})

			impl := kind.Webhook(ctx, nil)
			// Both ways the webhook serves: by policy, until the policy is
			// seen in force.
			if _, isAdmitter := impl.Reconciler().(webhook.Admitter); !isAdmitter {
				t.Errorf("admission reconciler %T is no webhook.Admitter", impl.Reconciler())
			}
			if n := logs.FilterMessageSnippet(tc.wantLog).Len(); n != 1 {
				t.Errorf("%d log lines with %q; logged: %v", n, tc.wantLog, messages(logs))
			}
		})
	}
}

// TestGithubBindingIsNotDeclarative checks that a kind writing its own Do
// is not taken for a declarative one.
func TestGithubBindingIsNotDeclarative(t *testing.T) {
	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if kind.Declarative {
		t.Error("GithubBinding is taken for declarative")
	}
}

// declaresOnly declares its Spec but does not publish it.
type declaresOnly struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status declarative.Status
}

func (d *declaresOnly) DeepCopyObject() runtime.Object {
	out := *d
	d.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	d.Status.DeepCopyInto(&out.Status)
	return &out
}
func (d *declaresOnly) GetSubject() tracker.Reference            { return tracker.Reference{} }
func (d *declaresOnly) GetBindingStatus() duck.BindableStatus    { return &d.Status.Status }
func (d *declaresOnly) Declare() declarative.Spec                { return declarative.Spec{} }
func (d *declaresOnly) Do(_ context.Context, wp *duck.WithPod)   { d.Declare().Do(wp) }
func (d *declaresOnly) Undo(_ context.Context, wp *duck.WithPod) { d.Declare().Undo(wp) }

// TestNewRefusesADeclarerThatDoesNotPublish checks that a kind declaring
// its Spec without publishing it, which the policy could never read, is
// refused with the remedy.
func TestNewRefusesADeclarerThatDoesNotPublish(t *testing.T) {
	_, err := wiring.New[declaresOnly](sinkv1alpha1.GroupVersionResource(), wiring.Options{Kind: "SinkBinding"})
	if err == nil || !strings.Contains(err.Error(), "not a psbinding.StatusPublisher: add PublishStatus") {
		t.Errorf("New = %v, want an error naming PublishStatus", err)
	}
}

func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.Message)
	}
	return out
}

// specInBinding keeps its Spec, as its users write it, at spec.declare
// (declarative.InBinding); path is the DeclaredPath it gives.
type specInBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Subject tracker.Reference `json:"subject"`
		Declare declarative.Spec  `json:"declare"`
		Other   string            `json:"other,omitempty"`
	} `json:"spec"`
	Status declarative.Status `json:"status,omitempty"`
}

var declaredPath = "spec.declare"

func (d *specInBinding) DeepCopyObject() runtime.Object {
	out := *d
	d.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	d.Status.DeepCopyInto(&out.Status)
	d.Spec.Declare.DeepCopyInto(&out.Spec.Declare)
	return &out
}
func (d *specInBinding) GetSubject() tracker.Reference            { return d.Spec.Subject }
func (d *specInBinding) GetBindingStatus() duck.BindableStatus    { return &d.Status.Status }
func (d *specInBinding) Declare() declarative.Spec                { return d.Spec.Declare }
func (d *specInBinding) DeclaredPath() string                     { return declaredPath }
func (d *specInBinding) Do(_ context.Context, wp *duck.WithPod)   { d.Declare().Do(wp) }
func (d *specInBinding) Undo(_ context.Context, wp *duck.WithPod) { d.Declare().Undo(wp) }
func (d *specInBinding) PublishStatus()                           { d.Status.Publish(d.Generation, d.Declare()) }

// TestNewChecksWhereTheSpecIs: a declarative.InBinding's DeclaredPath is
// checked against its Go type at construction, by JSON field names: it
// must hold a declarative.Spec; a computed kind has none.
func TestNewChecksWhereTheSpecIs(t *testing.T) {
	defer func(p string) { declaredPath = p }(declaredPath)
	for _, tc := range []struct {
		path, wantErr string
	}{
		{path: "spec.declare"},
		{path: "spec.Declare", wantErr: `names no field "Declare"`},
		{path: "spec.other", wantErr: `holds a string, not a declarative.Spec`},
		{path: "status.declared", wantErr: `is not in its spec`},
		{path: "spec.declare.env", wantErr: `holds a []v1.EnvVar, not a declarative.Spec`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			declaredPath = tc.path
			kind, err := wiring.New[specInBinding](sinkv1alpha1.GroupVersionResource(), wiring.Options{Kind: "SinkBinding"})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr == "" && kind.SpecPath != tc.path:
				t.Errorf("SpecPath = %q, want %q", kind.SpecPath, tc.path)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("New = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	sink, err := wiring.New[sinkv1alpha1.SinkBinding](sinkv1alpha1.GroupVersionResource(), wiring.Options{})
	if err != nil || sink.SpecPath != "" {
		t.Errorf("SinkBinding, which computes its Spec: SpecPath %q, error %v; want none", sink.SpecPath, err)
	}
}
