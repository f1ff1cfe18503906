package psbinding

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Labels that opt namespaces and objects in or out of every Binding.
const (
	// ExcludeLabel set to "true" on a namespace or a subject keeps the
	// webhook away from it, in either selector mode.
	ExcludeLabel = "bindings.bindkit.dev/exclude"
	// IncludeLabel set to "true" on a namespace opts it in, in inclusion
	// mode.
	IncludeLabel = "bindings.bindkit.dev/include"
)

// SelectorMode chooses which namespaces Bindings act in.
type SelectorMode int

const (
	// ExclusionMode, the default, lets Bindings act in every namespace but
	// those labelled ExcludeLabel=true.
	ExclusionMode SelectorMode = iota
	// InclusionMode lets Bindings act only in namespaces the operator
	// labelled IncludeLabel=true (and not ExcludeLabel=true). bindkit never
	// labels a namespace itself.
	InclusionMode
)

// KubeNamespaces are the namespaces of the cluster itself. The webhook is
// never called in them unless the operator opts in
// (AdmissionConfig.CallInKubeNamespaces), so an outage of the webhook can
// never block the control plane's own objects.
var KubeNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// DefaultMaxSelectorNamespaces is how many namespaces the webhook's
// namespaceSelector names at most (AdmissionConfig.MaxSelectorNamespaces).
// Measured (TestWebhookConfigurationSizeAtScale), the configuration of
// 10,000 namespaces is 235 KB of JSON with names of 20 bytes, and 665 KB
// (653 KB of protobuf, as etcd stores it) with the longest names a
// namespace may have (63 bytes): under half of etcd's 1.5 MiB per object
// and a fifth of the kube-apiserver's 3 MiB per request, leaving room for
// the CA bundle and an administrator's other webhooks. The kube-apiserver
// parses the selector once per configuration change and looks a
// namespace up in it as in a set. Past it, the selector falls back to
// every namespace but the protected ones, which the admission controller
// logs (a warning when it engages) and reports to its AdmissionObserver
// (bindkit_webhook_selector_fallbacks_total); Admit then lets requests from
// namespaces without Bindings through at once, without decoding them, but
// an outage of the webhook blocks creates there too.
const DefaultMaxSelectorNamespaces = 10000

// webhookSpec is what the admission controller decides about its webhook.
type webhookSpec struct {
	webhookName string // the webhook's name within the configuration
	path        string // the handler path on the server
	caBundle    []byte
	mode        SelectorMode
	// protected are never called: the system namespace (the webhook must
	// not block its own start) and, unless opted in, KubeNamespaces.
	protected []string
	// namespaces hold a Binding that can apply there; the webhook is
	// called only in them, unless allNamespaces.
	namespaces []string
	// allNamespaces replaces the list of namespaces by every namespace but
	// the protected ones, when the list is too long.
	allNamespaces bool
	// resources are the subject kinds' resources, as the RESTMapper names
	// them.
	resources []schema.GroupVersionResource
	// skipPatchesBy, if set, is the field manager of the reconcilers'
	// patches, for which the webhook is not called (OwnPatchesCondition).
	skipPatchesBy string
}

// OwnPatchesCondition is the name of the match condition the admission
// controller adds to its webhook so that the kube-apiserver does not call
// it for the process's own patches of subjects (see
// AdmissionConfig.CallOnOwnPatches). bindkit owns the condition of this
// name, and only it, among the webhook's matchConditions.
const OwnPatchesCondition = "bindings.bindkit.dev/not-own-patch"

// ownPatchesExpression is the CEL expression of OwnPatchesCondition for
// fieldManager. request.options is dynamic: an UPDATE's options always
// carry its UpdateOptions or PatchOptions, whose fieldManager is left out
// when empty, hence has(). An operation other than UPDATE makes the
// condition true before options is read, so it never fails to evaluate
// (which failurePolicy would turn into a refusal).
func ownPatchesExpression(fieldManager string) string {
	return fmt.Sprintf("!(request.operation == 'UPDATE' && has(request.options.fieldManager) && request.options.fieldManager == %s)", strconv.Quote(fieldManager))
}

// mergeMatchConditions returns installed with OwnPatchesCondition set for
// skipPatchesBy, or removed when it is empty; the administrator's
// conditions keep their order, and ours comes last.
func mergeMatchConditions(installed []admissionregistrationv1.MatchCondition, skipPatchesBy string) []admissionregistrationv1.MatchCondition {
	out := slices.DeleteFunc(slices.Clone(installed), func(c admissionregistrationv1.MatchCondition) bool { return c.Name == OwnPatchesCondition })
	if skipPatchesBy != "" {
		out = append(out, admissionregistrationv1.MatchCondition{Name: OwnPatchesCondition, Expression: ownPatchesExpression(skipPatchesBy)})
	}
	if len(out) == 0 {
		return installed[:0:0] // nil stays nil, empty stays empty
	}
	return out
}

// desiredWebhookConfiguration returns a copy of current with the webhook
// named spec.webhookName programmed for spec: one rule per API group over
// the subjects' main resources (never a subresource), CREATE and UPDATE,
// Equivalent matching, reinvocation if needed, the CA bundle and handler
// path on whichever client config (Service or URL) is installed,
// OwnPatchesCondition when spec.skipPatchesBy is set, and our
// selector requirements merged into the installed selectors. Without a
// namespace to call it in, it has no rules: it matches nothing.
//
// What bindkit owns it sets; the rest of the webhook (failurePolicy,
// timeoutSeconds, matchConditions other than OwnPatchesCondition, selector
// requirements on other labels)
// and every other webhook of the configuration are the administrator's and
// stay as installed. bindkit owns every selector requirement on
// kubernetes.io/metadata.name, IncludeLabel and ExcludeLabel.
//
// The result depends only on its inputs, never on their order, so
// reconciling twice with nothing changed yields an equal object and no
// update.
func desiredWebhookConfiguration(current *admissionregistrationv1.MutatingWebhookConfiguration, spec webhookSpec) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	desired := current.DeepCopy()
	i := slices.IndexFunc(desired.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == spec.webhookName })
	if i < 0 {
		return nil, fmt.Errorf("MutatingWebhookConfiguration %s has no webhook named %q", current.Name, spec.webhookName)
	}
	wh := &desired.Webhooks[i]

	if err := setClientConfig(&wh.ClientConfig, spec.path, spec.caBundle); err != nil {
		return nil, fmt.Errorf("MutatingWebhookConfiguration %s: webhook %s: %w", current.Name, wh.Name, err)
	}
	wh.Rules = rulesFor(spec.resources)
	if len(spec.namespaces) == 0 && !spec.allNamespaces {
		wh.Rules = []admissionregistrationv1.RuleWithOperations{}
	}
	equivalent := admissionregistrationv1.Equivalent
	wh.MatchPolicy = &equivalent
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	wh.ReinvocationPolicy = &ifNeeded
	none := admissionregistrationv1.SideEffectClassNone
	wh.SideEffects = &none
	wh.AdmissionReviewVersions = []string{"v1"}
	wh.MatchConditions = mergeMatchConditions(wh.MatchConditions, spec.skipPatchesBy)

	nsRequirements := []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: sortedSet(spec.protected)},
		{Key: ExcludeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}},
	}
	if !spec.allNamespaces && len(spec.namespaces) > 0 {
		nsRequirements = append(nsRequirements, metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: sortedSet(spec.namespaces)})
	}
	if spec.mode == InclusionMode {
		nsRequirements = append(nsRequirements, metav1.LabelSelectorRequirement{Key: IncludeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}})
	}
	wh.NamespaceSelector = mergeSelector(wh.NamespaceSelector, nsRequirements, corev1.LabelMetadataName, IncludeLabel, ExcludeLabel)
	wh.ObjectSelector = mergeSelector(wh.ObjectSelector, []metav1.LabelSelectorRequirement{
		{Key: ExcludeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}},
	}, ExcludeLabel)
	return desired, nil
}

// setClientConfig points the installed client config, Service or URL, at
// path and sets the CA bundle.
func setClientConfig(cc *admissionregistrationv1.WebhookClientConfig, path string, caBundle []byte) error {
	cc.CABundle = caBundle
	switch {
	case cc.Service != nil:
		cc.Service.Path = &path
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return fmt.Errorf("client config URL %q: %w", *cc.URL, err)
		}
		u.Path = path
		s := u.String()
		cc.URL = &s
	default:
		return fmt.Errorf("client config has neither a service nor a URL")
	}
	return nil
}

// rulesFor groups resources by API group into one rule each, sorted, with
// every version matched: which version a request uses does not change
// which Bindings apply, since the index keys on group and kind.
func rulesFor(resources []schema.GroupVersionResource) []admissionregistrationv1.RuleWithOperations {
	byGroup := map[string][]string{}
	for _, r := range resources {
		if !slices.Contains(byGroup[r.Group], r.Resource) {
			byGroup[r.Group] = append(byGroup[r.Group], r.Resource)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	namespaced := admissionregistrationv1.NamespacedScope
	rules := make([]admissionregistrationv1.RuleWithOperations, 0, len(groups))
	for _, g := range groups {
		names := byGroup[g]
		slices.Sort(names)
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{g},
				APIVersions: []string{"*"},
				Resources:   names,
				Scope:       &namespaced,
			},
		})
	}
	return rules
}

// sortedSet returns values sorted, without duplicates, as a new slice.
func sortedSet(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

// mergeSelector returns installed with ours added. Installed requirements
// on ownedKeys (the labels bindkit defines) are replaced, installed
// requirements equal to one of ours are dropped as duplicates, the rest is
// kept, and expressions are sorted so the result is stable.
func mergeSelector(installed *metav1.LabelSelector, ours []metav1.LabelSelectorRequirement, ownedKeys ...string) *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if installed != nil {
		out = installed.DeepCopy()
	}
	out.MatchExpressions = slices.DeleteFunc(out.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
		return slices.Contains(ownedKeys, r.Key) || slices.ContainsFunc(ours, func(o metav1.LabelSelectorRequirement) bool {
			return o.Key == r.Key && o.Operator == r.Operator && slices.Equal(o.Values, r.Values)
		})
	})
	for _, k := range ownedKeys {
		delete(out.MatchLabels, k)
	}
	if len(out.MatchLabels) == 0 {
		out.MatchLabels = nil
	}
	out.MatchExpressions = append(out.MatchExpressions, ours...)
	slices.SortStableFunc(out.MatchExpressions, func(a, b metav1.LabelSelectorRequirement) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(string(a.Operator), string(b.Operator)))
	})
	return out
}
