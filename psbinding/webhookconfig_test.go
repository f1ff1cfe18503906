package psbinding

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func installedConfig(cc admissionregistrationv1.WebhookClientConfig, nsSel *metav1.LabelSelector) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bindings.bindkit.dev"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "other.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://other")}},
			{Name: "bindings.bindkit.dev", ClientConfig: cc, NamespaceSelector: nsSel, FailurePolicy: ptr.To(admissionregistrationv1.Fail)},
		},
	}
}

func TestDesiredWebhookConfiguration(t *testing.T) {
	resources := []schema.GroupVersionResource{
		{Group: "batch", Version: "v1", Resource: "cronjobs"},
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "", Version: "v1", Resource: "pods"},
	}
	namespaced := ptr.To(admissionregistrationv1.NamespacedScope)
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	wantRules := []admissionregistrationv1.RuleWithOperations{
		{Operations: createUpdate, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"pods"}, Scope: namespaced}},
		{Operations: createUpdate, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"*"}, Resources: []string{"deployments", "statefulsets"}, Scope: namespaced}},
		{Operations: createUpdate, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"*"}, Resources: []string{"cronjobs"}, Scope: namespaced}},
	}
	notSystem := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"bindkit-system"}}
	notExcluded := metav1.LabelSelectorRequirement{Key: ExcludeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}
	included := metav1.LabelSelectorRequirement{Key: IncludeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}}
	userReq := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a"}}

	tests := []struct {
		name       string
		current    *admissionregistrationv1.MutatingWebhookConfiguration
		mode       SelectorMode
		wantClient admissionregistrationv1.WebhookClientConfig
		wantNS     *metav1.LabelSelector
	}{{
		name: "service client config, exclusion mode",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook"},
		}, nil),
		wantClient: admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook", Path: ptr.To("/bindings")},
			CABundle: []byte("CA"),
		},
		wantNS: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded, notSystem}},
	}, {
		name: "URL client config keeps host, installed selector kept, stale include dropped",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/old")},
			&metav1.LabelSelector{MatchLabels: map[string]string{"team": "a", IncludeLabel: "true"}, MatchExpressions: []metav1.LabelSelectorRequirement{userReq}}),
		wantClient: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/bindings"), CABundle: []byte("CA")},
		wantNS: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"},
			MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded, userReq, notSystem}},
	}, {
		name: "inclusion mode",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443")},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded}}),
		mode:       InclusionMode,
		wantClient: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/bindings"), CABundle: []byte("CA")},
		wantNS:     &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{included, notSystem}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := webhookSpec{webhookName: "bindings.bindkit.dev", path: "/bindings", caBundle: []byte("CA"),
				mode: tc.mode, systemNamespace: "bindkit-system", resources: resources}
			got, err := desiredWebhookConfiguration(tc.current, spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.current.Webhooks[0], got.Webhooks[0]); diff != "" {
				t.Errorf("another webhook was changed (-before +after):\n%s", diff)
			}
			wh := got.Webhooks[1]
			if diff := cmp.Diff(wantRules, wh.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			for _, r := range wh.Rules {
				for _, res := range r.Resources {
					if strings.Contains(res, "/") {
						t.Errorf("rule covers subresource %q", res)
					}
				}
			}
			if diff := cmp.Diff(tc.wantClient, wh.ClientConfig); diff != "" {
				t.Errorf("client config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNS, wh.NamespaceSelector); diff != "" {
				t.Errorf("namespace selector (-want +got):\n%s", diff)
			}
			wantObj := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded}}
			if diff := cmp.Diff(wantObj, wh.ObjectSelector); diff != "" {
				t.Errorf("object selector (-want +got):\n%s", diff)
			}
			wantFixed := []any{admissionregistrationv1.Equivalent, admissionregistrationv1.IfNeededReinvocationPolicy, admissionregistrationv1.SideEffectClassNone, []string{"v1"}, admissionregistrationv1.Fail}
			gotFixed := []any{*wh.MatchPolicy, *wh.ReinvocationPolicy, *wh.SideEffects, wh.AdmissionReviewVersions, *wh.FailurePolicy}
			if diff := cmp.Diff(wantFixed, gotFixed); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}

			// Idempotent: a second pass over its own output, with the
			// resources in another order, changes nothing.
			slicesReverse := append([]schema.GroupVersionResource(nil), resources...)
			for i, j := 0, len(slicesReverse)-1; i < j; i, j = i+1, j-1 {
				slicesReverse[i], slicesReverse[j] = slicesReverse[j], slicesReverse[i]
			}
			spec.resources = slicesReverse
			again, err := desiredWebhookConfiguration(got, spec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("second reconcile changed the configuration (-first +second):\n%s", diff)
			}
		})
	}
}

func TestDesiredWebhookConfigurationErrors(t *testing.T) {
	tests := []struct {
		name    string
		current *admissionregistrationv1.MutatingWebhookConfiguration
		want    string
	}{{
		name:    "webhook missing",
		current: &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}},
		want:    `MutatingWebhookConfiguration cfg has no webhook named "bindings.bindkit.dev"`,
	}, {
		name:    "no client config",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{}, nil),
		want:    "MutatingWebhookConfiguration bindings.bindkit.dev: webhook bindings.bindkit.dev: client config has neither a service nor a URL",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := desiredWebhookConfiguration(tc.current, webhookSpec{webhookName: "bindings.bindkit.dev", path: "/p"})
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
