package psbinding

import (
	"slices"
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
	protected := []string{"kube-system", "bindkit-system", "kube-public", "kube-node-lease"}
	notProtected := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
		Values: []string{"bindkit-system", "kube-node-lease", "kube-public", "kube-system"}}
	withBindings := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}}
	notExcluded := metav1.LabelSelectorRequirement{Key: ExcludeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}
	included := metav1.LabelSelectorRequirement{Key: IncludeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}}
	userReq := metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}
	staleOurs := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"gone"}}

	tests := []struct {
		name          string
		current       *admissionregistrationv1.MutatingWebhookConfiguration
		mode          SelectorMode
		allNamespaces bool
		wantClient    admissionregistrationv1.WebhookClientConfig
		wantNS        *metav1.LabelSelector
	}{{
		name: "service client config, exclusion mode",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook"},
		}, nil),
		wantClient: admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook", Path: ptr.To("/bindings")},
			CABundle: []byte("CA"),
		},
		wantNS: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded, withBindings, notProtected}},
	}, {
		name: "URL client config keeps host, admin's selector kept, bindkit's stale requirements replaced",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/old")},
			&metav1.LabelSelector{
				MatchLabels:      map[string]string{"tier": "apps", IncludeLabel: "true", "kubernetes.io/metadata.name": "gone"},
				MatchExpressions: []metav1.LabelSelectorRequirement{userReq, staleOurs},
			}),
		wantClient: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/bindings"), CABundle: []byte("CA")},
		wantNS: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "apps"},
			MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded, withBindings, notProtected, userReq}},
	}, {
		name: "inclusion mode: the namespaces with Bindings and labelled include, not excluded",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443")},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded}}),
		mode:       InclusionMode,
		wantClient: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/bindings"), CABundle: []byte("CA")},
		wantNS:     &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded, included, withBindings, notProtected}},
	}, {
		name: "too many namespaces to name: every namespace but the protected ones",
		current: installedConfig(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443")},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{withBindings}}),
		allNamespaces: true,
		wantClient:    admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443/bindings"), CABundle: []byte("CA")},
		wantNS:        &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notExcluded, notProtected}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := webhookSpec{webhookName: "bindings.bindkit.dev", path: "/bindings", caBundle: []byte("CA"),
				mode: tc.mode, protected: protected, namespaces: []string{"team-b", "team-a", "team-b"}, resources: resources}
			if tc.allNamespaces {
				spec.namespaces, spec.allNamespaces = nil, true
			}
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
			slices.Reverse(spec.namespaces)
			slices.Reverse(spec.protected)
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

// TestDesiredWebhookConfigurationWithoutNamespaces: with no namespace to
// call it in, the webhook has no rule and matches nothing, whatever
// resources the Bindings name.
func TestDesiredWebhookConfigurationWithoutNamespaces(t *testing.T) {
	current := installedConfig(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:8443")}, nil)
	current.Webhooks[1].Rules = []admissionregistrationv1.RuleWithOperations{{Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}}}}
	got, err := desiredWebhookConfiguration(current, webhookSpec{webhookName: "bindings.bindkit.dev", path: "/p", caBundle: []byte("CA"),
		protected: []string{"bindkit-system"}, resources: []schema.GroupVersionResource{{Group: "apps", Version: "v1", Resource: "deployments"}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Webhooks[1].Rules); n != 0 {
		t.Errorf("%d rules without a namespace to call the webhook in, want 0", n)
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

func TestMergeMatchConditions(t *testing.T) {
	admins := admissionregistrationv1.MatchCondition{Name: "not-dry-run", Expression: "!request.dryRun"}
	ours := func(fm string) admissionregistrationv1.MatchCondition {
		return admissionregistrationv1.MatchCondition{Name: OwnPatchesCondition, Expression: ownPatchesExpression(fm)}
	}
	for _, tc := range []struct {
		name      string
		installed []admissionregistrationv1.MatchCondition
		skip      string
		want      []admissionregistrationv1.MatchCondition
	}{
		{name: "added after the admin's", installed: []admissionregistrationv1.MatchCondition{admins}, skip: "ctl", want: []admissionregistrationv1.MatchCondition{admins, ours("ctl")}},
		{name: "added to none", skip: "ctl", want: []admissionregistrationv1.MatchCondition{ours("ctl")}},
		{name: "field manager changed", installed: []admissionregistrationv1.MatchCondition{ours("old"), admins}, skip: "ctl", want: []admissionregistrationv1.MatchCondition{admins, ours("ctl")}},
		{name: "removed when the webhook is called on own patches", installed: []admissionregistrationv1.MatchCondition{ours("ctl"), admins}, want: []admissionregistrationv1.MatchCondition{admins}},
		{name: "nothing stays nothing", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			installed := slices.Clone(tc.installed)
			if diff := cmp.Diff(tc.want, mergeMatchConditions(installed, tc.skip)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.installed, installed); diff != "" {
				t.Errorf("installed changed (-want +got):\n%s", diff)
			}
		})
	}
}

// The expression quotes the field manager, so no name can change what it
// tests.
func TestOwnPatchesExpressionQuotes(t *testing.T) {
	got := ownPatchesExpression(`a" || true || "`)
	want := `!(request.operation == 'UPDATE' && has(request.options.fieldManager) && request.options.fieldManager == "a\" || true || \"")`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
