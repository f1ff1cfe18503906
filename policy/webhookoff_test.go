package policy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/policy"
)

// TestWebhookOff checks that the kind's webhook leaves the path only once
// the policy's binding has settled, that only its rules go, and that a
// missing binding or configuration is no error.
func TestWebhookOff(t *testing.T) {
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}
	config := func(r []admissionregistrationv1.RuleWithOperations) *admissionregistrationv1.MutatingWebhookConfiguration {
		return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sinks.example.com"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{
				{Name: "other.example.com", Rules: rules},
				{Name: "sinks.example.com", Rules: r, FailurePolicy: new(admissionregistrationv1.Fail)},
			}}
	}
	binding := func(age time.Duration) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
		return &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind.sinks.example.com",
			CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	for _, tc := range []struct {
		name       string
		objects    []runtime.Object
		want       policy.Action
		wantAfter  time.Duration
		wantConfig *admissionregistrationv1.MutatingWebhookConfiguration
	}{
		{"no policy binding yet", []runtime.Object{config(rules)}, policy.Unchanged, 0, config(rules)},
		{"binding not settled", []runtime.Object{config(rules), binding(time.Second)}, policy.Unchanged, 2 * time.Second, config(rules)},
		{"settled: the webhook's rules go, the rest stays", []runtime.Object{config(rules), binding(policy.DefaultSettle)}, policy.Disabled, 0, config(nil)},
		{"already out of the path", []runtime.Object{config(nil), binding(time.Hour)}, policy.Unchanged, 0, config(nil)},
		{"configuration not installed", []runtime.Object{binding(time.Hour)}, policy.Unchanged, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(tc.objects...)
			api := kube.AdmissionregistrationV1()
			off := &policy.WebhookOff{
				Configuration: "sinks.example.com", Webhook: "sinks.example.com", Kube: kube,
				Configurations: func(name string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
					return api.MutatingWebhookConfigurations().Get(t.Context(), name, metav1.GetOptions{})
				},
				PolicyBinding: "bind.sinks.example.com",
				PolicyBindings: func(name string) (*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
					return api.MutatingAdmissionPolicyBindings().Get(t.Context(), name, metav1.GetOptions{})
				},
				Now: func() time.Time { return now },
			}
			got, err := off.Ensure(t.Context())
			after, requeued := controller.IsRequeueAfter(err)
			if (tc.wantAfter != 0) != requeued || after != tc.wantAfter || (!requeued && err != nil) {
				t.Fatalf("Ensure error = %v, want a requeue after %v", err, tc.wantAfter)
			}
			if got != tc.want {
				t.Errorf("Ensure = %q, want %q", got, tc.want)
			}
			if tc.wantConfig == nil {
				return
			}
			cfg, err := api.MutatingWebhookConfigurations().Get(t.Context(), "sinks.example.com", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantConfig.Webhooks, cfg.Webhooks); diff != "" {
				t.Errorf("webhooks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRemoveMutatingPolicy checks that both objects go, and that a second
// call, with nothing left, is no error and removes nothing.
func TestRemoveMutatingPolicy(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "bind.sinks.example.com"}
	kube := fake.NewClientset(&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: meta}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: meta})
	for i, want := range []bool{true, false} {
		removed, err := policy.RemoveMutatingPolicy(t.Context(), kube, meta.Name)
		if err != nil || removed != want {
			t.Errorf("call %d: RemoveMutatingPolicy = %v, %v; want %v, nil", i+1, removed, err, want)
		}
	}
	left, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("policies left: %v, %v", left, err)
	}
}
