package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// grant is one resource, as "group/resource" ("" group for core), in one
// scope.
type grant struct {
	scope    string // "cluster" or the namespace of a Role
	resource string
}

// allowlist is every verb the controller and webhook may hold on each
// resource. Widening a role means widening this list, in review.
var allowlist = map[grant][]string{
	{"cluster", "bindings.bindkit.dev/githubbindings"}:                        {"get", "list", "watch", "patch"},
	{"cluster", "bindings.bindkit.dev/githubbindings/status"}:                 {"update"},
	{"cluster", "apps/deployments"}:                                           {"get", "list", "watch", "patch"},
	{"cluster", "apps/statefulsets"}:                                          {"get", "list", "watch", "patch"},
	{"cluster", "apps/daemonsets"}:                                            {"get", "list", "watch", "patch"},
	{"cluster", "apps/replicasets"}:                                           {"get", "list", "watch", "patch"},
	{"cluster", "/namespaces"}:                                                {"list", "watch"},
	{"cluster", "batch/cronjobs"}:                                             {"get", "list", "watch", "patch"},
	{"cluster", "admissionregistration.k8s.io/mutatingwebhookconfigurations"}: {"list", "watch", "update"},
	{"cluster", "/events"}:                                                    {"create", "patch"},
	// The admission policies on the Bindings (the authority policy, the
	// namespace guard, the requested-by record): list, watch and update
	// are limited to their names in 201-clusterrole.yaml; create cannot be.
	{"cluster", "admissionregistration.k8s.io/validatingadmissionpolicies"}:       {"list", "watch", "update", "create"},
	{"cluster", "admissionregistration.k8s.io/validatingadmissionpolicybindings"}: {"list", "watch", "update", "create"},
	{"cluster", "admissionregistration.k8s.io/mutatingadmissionpolicies"}:         {"list", "watch", "update", "create"},
	{"cluster", "admissionregistration.k8s.io/mutatingadmissionpolicybindings"}:   {"list", "watch", "update", "create"},
	// The metrics endpoint's reviews of its scrapers' tokens.
	{"cluster", "authentication.k8s.io/tokenreviews"}:        {"create"},
	{"cluster", "authorization.k8s.io/subjectaccessreviews"}: {"create"},
	{"bindkit-system", "coordination.k8s.io/leases"}:         {"get", "create", "update"},
	{"bindkit-system", "/secrets"}:                           {"list", "watch", "create", "update"},
	{"bindkit-system", "/configmaps"}:                        {"list", "watch"},
}

// resourceNames pins grants that must stay limited to named objects.
var resourceNames = map[grant][]string{
	{"cluster", "admissionregistration.k8s.io/mutatingwebhookconfigurations"}: {"githubbindings.webhook.bindkit.dev"},
}

// checkRules reports every grant of rules, in scope, that the allowlist
// does not cover.
func checkRules(scope string, rules []rbacv1.PolicyRule) []string {
	var problems []string
	for i, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			problems = append(problems, fmt.Sprintf("rule %d: non-resource URLs %v", i, r.NonResourceURLs))
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := grant{scope, g + "/" + res}
				allowed, ok := allowlist[key]
				if !ok {
					problems = append(problems, fmt.Sprintf("rule %d: %s %s is not allowlisted", i, scope, key.resource))
					continue
				}
				for _, v := range r.Verbs {
					if !slices.Contains(allowed, v) {
						problems = append(problems, fmt.Sprintf("rule %d: verb %q on %s %s is not allowlisted", i, v, scope, key.resource))
					}
				}
				if want, pinned := resourceNames[key]; pinned && !cmp.Equal(want, r.ResourceNames) {
					problems = append(problems, fmt.Sprintf("rule %d: %s %s must be limited to resourceNames %v, has %v", i, scope, key.resource, want, r.ResourceNames))
				}
			}
		}
	}
	return problems
}

func rulesOf(t *testing.T, obj *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.Role // a ClusterRole's rules decode the same way
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), key(obj), err)
	}
	return role.Rules
}

// metricsReaderRole is config/'s role for scrapers, which grants get on
// /metrics and nothing else, and is bound to no one: the operator binds
// it to their Prometheus.
const metricsReaderRole = "githubbinding-controller-metrics-reader"

// TestRBACStaysWithinAllowlist fails on privilege creep: a rule in config/
// that grants a resource or verb the allowlist does not name, or a
// metrics-reader role that grants more than get on /metrics or is bound
// to anyone.
func TestRBACStaysWithinAllowlist(t *testing.T) {
	var roles int
	for _, m := range readManifests(t, ".") {
		if aggregated(m.obj) {
			continue // a role for users (TestAggregatedRolesGrantOnlyBindings)
		}
		var scope string
		switch m.obj.GetKind() {
		case "ClusterRoleBinding", "RoleBinding":
			if ref, _, _ := unstructured.NestedString(m.obj.Object, "roleRef", "name"); ref == metricsReaderRole {
				t.Errorf("%s binds %s: config/ leaves it for the operator to bind to their scraper", m, metricsReaderRole)
			}
			continue
		case "ClusterRole":
			scope = "cluster"
			if m.obj.GetName() == metricsReaderRole {
				roles++
				want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
				if diff := cmp.Diff(want, rulesOf(t, m.obj)); diff != "" {
					t.Errorf("%s: rules (-want +got):\n%s", m, diff)
				}
				continue
			}
		case "Role":
			scope = m.obj.GetNamespace()
		default:
			continue
		}
		roles++
		if problems := checkRules(scope, rulesOf(t, m.obj)); len(problems) > 0 {
			t.Errorf("%s:\n%v", m, problems)
		}
	}
	if roles != 3 {
		t.Errorf("found %d roles, want the ClusterRole, the Role and the metrics-reader ClusterRole", roles)
	}
}

// aggregated reports a ClusterRole that Kubernetes aggregates into its
// user-facing roles (admin, edit, view): a role for users, not for the
// controller.
func aggregated(obj *unstructured.Unstructured) bool {
	for k := range obj.GetLabels() {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			return true
		}
	}
	return false
}

// TestAggregatedRolesGrantOnlyBindings checks the roles config/ gives
// users through admin, edit and view: writing GithubBindings into admin
// and edit, reading them into view, and nothing else (granting them is
// safe only because a Binding reaches no further than its author may).
func TestAggregatedRolesGrantOnlyBindings(t *testing.T) {
	want := map[string][]rbacv1.PolicyRule{
		"githubbindings.bindings.bindkit.dev-edit": {
			{APIGroups: []string{"bindings.bindkit.dev"}, Resources: []string{"githubbindings"}, Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
			{APIGroups: []string{"bindings.bindkit.dev"}, Resources: []string{"githubbindings/status"}, Verbs: []string{"get"}},
		},
		"githubbindings.bindings.bindkit.dev-view": {
			{APIGroups: []string{"bindings.bindkit.dev"}, Resources: []string{"githubbindings", "githubbindings/status"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	wantLabels := map[string][]string{
		"githubbindings.bindings.bindkit.dev-edit": {"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"},
		"githubbindings.bindings.bindkit.dev-view": {"rbac.authorization.k8s.io/aggregate-to-view"},
	}
	got := map[string][]rbacv1.PolicyRule{}
	for _, m := range readManifests(t, ".") {
		if m.obj.GetKind() != "ClusterRole" || !aggregated(m.obj) {
			continue
		}
		got[m.obj.GetName()] = rulesOf(t, m.obj)
		var labels []string
		for k, v := range m.obj.GetLabels() {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") && v == "true" {
				labels = append(labels, k)
			}
		}
		slices.Sort(labels)
		if diff := cmp.Diff(wantLabels[m.obj.GetName()], labels); diff != "" {
			t.Errorf("%s: aggregation labels (-want +got):\n%s", m.obj.GetName(), diff)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aggregated roles (-want +got):\n%s", diff)
	}
}

// TestCheckRulesCatchesCreep proves the check above can fail.
func TestCheckRulesCatchesCreep(t *testing.T) {
	tests := []struct {
		name  string
		scope string
		rule  rbacv1.PolicyRule
		want  int // problems
	}{
		{"allowed", "cluster", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}}, 0},
		{"wildcard verb", "cluster", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}}, 1},
		{"wildcard resource", "cluster", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"get"}}, 1},
		{"extra verb", "cluster", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"delete"}}, 2},
		{"secrets cluster-wide", "cluster", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}, 1},
		{"webhook configuration without a name", "cluster", rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, Verbs: []string{"update"}}, 1},
		{"pods", "bindkit-system", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}, 1},
		{"non-resource URL", "cluster", rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkRules(tc.scope, []rbacv1.PolicyRule{tc.rule}); len(got) != tc.want {
				t.Errorf("checkRules = %d problems %v, want %d", len(got), got, tc.want)
			}
		})
	}
}

// TestExamplesMetricsReaderRoles: each example's config/ carries a
// metrics-reader ClusterRole granting what config/'s does, get on
// /metrics and nothing else, named after its component.
func TestExamplesMetricsReaderRoles(t *testing.T) {
	want := rulesOf(t, find(t, readManifests(t, "."), "ClusterRole", metricsReaderRole))
	for _, dir := range []string{"../examples/configbinding/config", "../examples/sinkbinding/config", "../examples/knativewalkthrough/config"} {
		var found []string
		for _, m := range readManifests(t, dir) {
			if m.obj.GetKind() != "ClusterRole" || !strings.HasSuffix(m.obj.GetName(), "-metrics-reader") {
				continue
			}
			found = append(found, m.obj.GetName())
			if diff := cmp.Diff(want, rulesOf(t, m.obj)); diff != "" {
				t.Errorf("%s/%s: rules differ from config/'s %s (-config +example):\n%s", dir, m, metricsReaderRole, diff)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: metrics-reader ClusterRoles %v, want one", dir, found)
		}
	}
}
