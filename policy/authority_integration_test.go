package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/policy"
)

// authorityCase is one write of a Binding by an impersonated user, and the
// refusal it must get ("" for none).
type authorityCase struct {
	name    string
	user    string
	spec    map[string]any
	refusal string
}

// TestAuthorityPolicyWithRealAPIServer programs the authority and
// requested-by policies of a Binding kind straight into the kube-apiserver
// (no bindkit process runs) and writes Bindings as impersonated users with
// RBAC of their own: a Binding is refused at create and at update, with
// one line naming the user, the verb, the resource and the name, unless
// its author may patch what its subject reaches and hold the verb of each
// declared reference; writes that leave the spec alone pass; the record of
// who asked is the kube-apiserver's, not the user's.
func TestAuthorityPolicyWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "authority"
	mustCreate(t, ns, kube)
	grant(t, kube, ns, "binder", nil, rule("test.bindkit.dev", "envbindings", "create", "update", "get"), rule("apps", "deployments", "get", "list"))
	grant(t, kube, ns, "patcher", nil, rule("test.bindkit.dev", "envbindings", "create", "update", "get"), rule("apps", "deployments", "get", "patch"))
	grant(t, kube, ns, "one-patcher", []string{"web"}, rule("apps", "deployments", "patch"))
	grant(t, kube, ns, "one-patcher", nil, rule("test.bindkit.dev", "envbindings", "create", "update", "get"))
	grant(t, kube, ns, "reader", []string{"token"}, rule("", "secrets", "get"))
	grant(t, kube, ns, "reader", nil, rule("test.bindkit.dev", "envbindings", "create", "update", "get"), rule("apps", "deployments", "patch"), rule("test.bindkit.dev", "workloads", "patch"))
	grant(t, kube, ns, "wildcard", nil, rule("test.bindkit.dev", "envbindings", "create", "update", "get"), rule("example.com", "*", "patch"))

	opts := policy.AuthorityOptions{
		Resource:     envBindings,
		SubjectKinds: []policy.SubjectKind{{Group: "test.bindkit.dev", Kind: "Workload", Resource: "workloads"}},
		References: []policy.Reference{{
			Paths: []string{"spec.secret.name", "spec.sources[].secretName", "spec.containers[].env[].secretName"}, Resource: "secrets", Verb: "get",
		}},
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	probe := envBinding(ns, "probe", map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}})
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	program(t, kube, opts, func() bool {
		_, err := as(t, env.Config, "binder").Resource(envBindings).Namespace(ns).Create(ctx, probe, dryRun)
		if !apierrors.IsForbidden(err) {
			return false
		}
		got, err := dyn.Resource(envBindings).Namespace(ns).Create(ctx, probe, dryRun)
		return err == nil && got.GetAnnotations()[policy.RequestedByAnnotation] != ""
	})

	deployment := func(name string) map[string]any {
		return map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}}
	}
	selector := map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}}
	withSecrets := func(spec map[string]any, extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range spec {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	const tail = ", which this Binding's subject names; a Binding changes only what its author may"
	cases := []authorityCase{
		{"named subject without patch", "binder", deployment("web"), `user "binder" may not patch deployments.apps "web" in namespace "authority"` + tail},
		{"selector without patch", "binder", selector, `user "binder" may not patch deployments.apps (every name: the subject selects by label) in namespace "authority"` + tail},
		{"named subject with patch", "patcher", deployment("web"), ""},
		{"selector with patch", "patcher", selector, ""},
		{"named subject with patch on that name", "one-patcher", deployment("web"), ""},
		{"named subject with patch on another name", "one-patcher", deployment("api"), `user "one-patcher" may not patch deployments.apps "api" in namespace "authority"` + tail},
		{"selector with patch on one name", "one-patcher", selector, `user "one-patcher" may not patch deployments.apps (every name: the subject selects by label) in namespace "authority"` + tail},
		{"subject in a namespace named", "patcher", map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "elsewhere", "name": "web"}},
			`user "patcher" may not patch deployments.apps "web" in namespace "elsewhere"` + tail},
		{"declared custom kind", "reader", map[string]any{"subject": map[string]any{"apiVersion": "test.bindkit.dev/v1", "kind": "Workload", "name": "w"}}, ""},
		{"declared custom kind without patch", "patcher", map[string]any{"subject": map[string]any{"apiVersion": "test.bindkit.dev/v1", "kind": "Workload", "name": "w"}},
			`user "patcher" may not patch workloads.test.bindkit.dev "w" in namespace "authority"` + tail},
		{"undeclared kind", "patcher", map[string]any{"subject": map[string]any{"apiVersion": "example.com/v1", "kind": "App", "name": "a"}},
			`user "patcher" may not patch every resource of group "example.com" (kind example.com/App is not one the Binding kind declares) "a" in namespace "authority"` + tail},
		{"undeclared kind with every resource of its group", "wildcard", map[string]any{"subject": map[string]any{"apiVersion": "example.com/v1", "kind": "App", "name": "a"}}, ""},
		{"reference the author may get", "reader", withSecrets(deployment("web"), map[string]any{"secret": map[string]any{"name": "token"}}), ""},
		{"reference the author may not get", "reader", withSecrets(deployment("web"), map[string]any{"secret": map[string]any{"name": "admin-token"}}),
			`user "reader" may not get secrets "admin-token" in namespace "authority", which this Binding names (spec.secret.name, spec.sources[].secretName, spec.containers[].env[].secretName); a Binding carries only what its author may`},
		{"reference in a nested list", "reader", withSecrets(deployment("web"), map[string]any{
			"sources":    []any{map[string]any{"secretName": "token"}, map[string]any{}},
			"containers": []any{map[string]any{"env": []any{map[string]any{"secretName": "token"}, map[string]any{"secretName": "db"}}}},
		}), `user "reader" may not get secrets "db" in namespace "authority", which this Binding names (spec.secret.name, spec.sources[].secretName, spec.containers[].env[].secretName); a Binding carries only what its author may`},
		{"more references than checked one by one", "reader", withSecrets(deployment("web"), map[string]any{"sources": secretSources(policy.MaxNamesChecked + 1)}),
			fmt.Sprintf(`user "reader" may not get secrets (every name: this Binding names %d, more than the %d checked one by one) in namespace "authority", which this Binding names (spec.secret.name, spec.sources[].secretName, spec.containers[].env[].secretName); a Binding carries only what its author may`, policy.MaxNamesChecked+1, policy.MaxNamesChecked)},
		{"a repeated reference counts once", "reader", withSecrets(deployment("web"), map[string]any{"sources": []any{
			map[string]any{"secretName": "token"}, map[string]any{"secretName": "token"}, map[string]any{"secretName": "token"},
			map[string]any{"secretName": "token"}, map[string]any{"secretName": "token"}, map[string]any{"secretName": "token"}, map[string]any{"secretName": "token"},
		}}), ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("b%d", i)
			_, err := as(t, env.Config, tc.user).Resource(envBindings).Namespace(ns).Create(ctx, envBinding(ns, name, tc.spec), metav1.CreateOptions{})
			checkRefusal(t, "create", err, tc.refusal)
			// The same spec as an update of a harmless Binding an admin
			// wrote.
			harmless := "h" + name
			if _, err := dynamic.NewForConfigOrDie(env.Config).Resource(envBindings).Namespace(ns).Create(ctx, envBinding(ns, harmless, map[string]any{}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err = update(ctx, as(t, env.Config, tc.user), ns, harmless, func(b *unstructured.Unstructured) { b.Object["spec"] = tc.spec })
			checkRefusal(t, "update", err, tc.refusal)
		})
	}

	t.Run("writes that leave the spec alone", func(t *testing.T) {
		admin := dynamic.NewForConfigOrDie(env.Config).Resource(envBindings).Namespace(ns)
		if _, err := admin.Create(ctx, envBinding(ns, "colleague", deployment("web")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A label, a finalizer: no authority over the subject needed.
		err := update(ctx, as(t, env.Config, "binder"), ns, "colleague", func(b *unstructured.Unstructured) {
			b.SetLabels(map[string]string{"team": "a"})
			b.SetFinalizers([]string{"example.com/keep"})
		})
		if err != nil {
			t.Fatalf("label and finalizer update by a user who may not patch the subject: %v", err)
		}
		b, err := admin.Get(ctx, "colleague", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.SetFinalizers(nil)
		if _, err := admin.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("who asked", func(t *testing.T) {
		requestedBy := func(name string) string {
			b, err := dynamic.NewForConfigOrDie(env.Config).Resource(envBindings).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return b.GetAnnotations()[policy.RequestedByAnnotation]
		}
		forged := envBinding(ns, "asked", deployment("web"))
		forged.SetAnnotations(map[string]string{policy.RequestedByAnnotation: "someone-else"})
		if _, err := as(t, env.Config, "patcher").Resource(envBindings).Namespace(ns).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := requestedBy("asked"); got != "patcher" {
			t.Errorf("after a create by patcher claiming someone-else: %s = %q, want patcher", policy.RequestedByAnnotation, got)
		}
		// A metadata-only write cannot change it, nor remove it.
		for _, value := range []string{"binder-claims", ""} {
			err := update(ctx, as(t, env.Config, "binder"), ns, "asked", func(b *unstructured.Unstructured) {
				a := b.GetAnnotations()
				if value == "" {
					delete(a, policy.RequestedByAnnotation)
				} else {
					a[policy.RequestedByAnnotation] = value
				}
				b.SetAnnotations(a)
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := requestedBy("asked"); got != "patcher" {
				t.Errorf("after binder set %q without changing the spec: %s = %q, want patcher", value, policy.RequestedByAnnotation, got)
			}
		}
		// A spec change records its author.
		if err := update(ctx, as(t, env.Config, "one-patcher"), ns, "asked", func(b *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(b.Object, "web", "spec", "subject", "name")
			_ = unstructured.SetNestedField(b.Object, "v2", "spec", "value")
		}); err != nil {
			t.Fatal(err)
		}
		if got := requestedBy("asked"); got != "one-patcher" {
			t.Errorf("after one-patcher changed the spec: %s = %q, want one-patcher", policy.RequestedByAnnotation, got)
		}
	})
}

// TestAuthorityPolicyStoredAsBuiltWithRealAPIServer checks that the
// kube-apiserver stores the policies as built (every default filled in),
// so a Reconciler keeping them programmed settles instead of rewriting
// them.
func TestAuthorityPolicyStoredAsBuiltWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	opts := policy.AuthorityOptions{Resource: envBindings, Name: "authority.stored.test", References: []policy.Reference{{Paths: []string{"spec.secret.name"}, Resource: "secrets", Verb: "get"}}}
	vap, vapb, err := policy.Authority(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, mb, err := policy.RequestedBy(envBindings, "requested-by.stored.test")
	if err != nil {
		t.Fatal(err)
	}
	admission := kube.AdmissionregistrationV1()
	gotVAP, err := admission.ValidatingAdmissionPolicies().Create(t.Context(), vap, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotVAPB, err := admission.ValidatingAdmissionPolicyBindings().Create(t.Context(), vapb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotMAP, err := admission.MutatingAdmissionPolicies().Create(t.Context(), m, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotMAPB, err := admission.MutatingAdmissionPolicyBindings().Create(t.Context(), mb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		want, have any
	}{{"ValidatingAdmissionPolicy", vap.Spec, gotVAP.Spec}, {"ValidatingAdmissionPolicyBinding", vapb.Spec, gotVAPB.Spec},
		{"MutatingAdmissionPolicy", m.Spec, gotMAP.Spec}, {"MutatingAdmissionPolicyBinding", mb.Spec, gotMAPB.Spec}} {
		if diff := cmp.Diff(c.want, c.have); diff != "" {
			t.Errorf("%s stored differs from built (-built +stored):\n%s", c.name, diff)
		}
	}
}

func secretSources(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"secretName": fmt.Sprintf("s%d", i)}
	}
	return out
}

// program writes the authority and requested-by policies of opts and
// waits until the kube-apiserver enforces both: until inForce says so.
func program(t *testing.T, kube kubernetes.Interface, opts policy.AuthorityOptions, inForce func() bool) {
	t.Helper()
	ctx := t.Context()
	vap, vapb, err := policy.Authority(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, mb, err := policy.RequestedBy(opts.Resource, "")
	if err != nil {
		t.Fatal(err)
	}
	admission := kube.AdmissionregistrationV1()
	for _, create := range []func() error{
		func() error {
			_, err := admission.ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, vapb, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admission.MutatingAdmissionPolicies().Create(ctx, m, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admission.MutatingAdmissionPolicyBindings().Create(ctx, mb, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(ctx, vapb.Name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(ctx, vap.Name, metav1.DeleteOptions{})
		_ = admission.MutatingAdmissionPolicyBindings().Delete(ctx, mb.Name, metav1.DeleteOptions{})
		_ = admission.MutatingAdmissionPolicies().Delete(ctx, m.Name, metav1.DeleteOptions{})
	})
	poll(t, "the authority and requested-by policies in force", func() (bool, error) { return inForce(), nil })
}

func checkRefusal(t *testing.T, what string, err error, refusal string) {
	t.Helper()
	switch {
	case refusal == "" && err != nil:
		t.Errorf("%s: refused, want allowed: %v", what, err)
	case refusal != "" && err == nil:
		t.Errorf("%s: allowed, want refused with %q", what, refusal)
	case refusal != "" && !apierrors.IsForbidden(err):
		t.Errorf("%s: got %v, want Forbidden with %q", what, err, refusal)
	case refusal != "" && !strings.HasSuffix(err.Error(), ": "+refusal):
		t.Errorf("%s: got message\n%s\nwant it to end with\n%s", what, err, refusal)
	case refusal != "" && strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: message spans lines: %q", what, err)
	}
}

func envBinding(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": envBindings.GroupVersion().String(), "kind": "EnvBinding",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     spec,
	}}
}

func update(ctx context.Context, client dynamic.Interface, namespace, name string, change func(*unstructured.Unstructured)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := client.Resource(envBindings).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(b)
		_, err = client.Resource(envBindings).Namespace(namespace).Update(ctx, b, metav1.UpdateOptions{})
		return err
	})
}

// as is a client acting as user, with only the rights RBAC grants them.
func as(t testing.TB, cfg *rest.Config, user string) dynamic.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return dynamic.NewForConfigOrDie(c)
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// grant gives user the rules in namespace, each limited to names if set.
func grant(t testing.TB, kube kubernetes.Interface, namespace, user string, names []string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	for i := range rules {
		rules[i].ResourceNames = names
	}
	name := fmt.Sprintf("%s-%d", user, len(names))
	for _, r := range rules {
		name += "-" + r.Resources[0]
	}
	ctx := t.Context()
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t testing.TB, namespace string, kube kubernetes.Interface) {
	t.Helper()
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestDeclaredReferencesWithRealAPIServer checks the References
// declarative.References derives for a declarative.Spec kept in a
// Binding's spec: each Secret and ConfigMap it names, in env, envFrom,
// volumes and added containers, needs its author's get.
func TestDeclaredReferencesWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "declared-references"
	mustCreate(t, ns, kube)
	grant(t, kube, ns, "declarer", []string{"token"}, rule("", "secrets", "get"))
	grant(t, kube, ns, "declarer", []string{"settings"}, rule("", "configmaps", "get"))
	grant(t, kube, ns, "declarer", nil, rule("test.bindkit.dev", "envbindings", "create"), rule("apps", "deployments", "patch"))
	program(t, kube, policy.AuthorityOptions{Resource: envBindings, Name: "authority-declared.test", References: declarative.References("spec.add")}, func() bool {
		probe := envBinding(ns, "probe", map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
			"add": map[string]any{"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "probe"}}}}})
		_, err := as(t, env.Config, "declarer").Resource(envBindings).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err)
	})

	subject := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
	secretEnv := func(name string) map[string]any {
		return map[string]any{"name": "TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": name, "key": "token"}}}
	}
	const tail = ` in namespace "declared-references", which this Binding names (`
	cases := []struct {
		name    string
		add     map[string]any
		refusal string
	}{
		{"env from a Secret she may read", map[string]any{"env": []any{secretEnv("token")}}, ""},
		{"env from a Secret she may not read", map[string]any{"env": []any{secretEnv("admin-token")}}, `user "declarer" may not get secrets "admin-token"` + tail},
		{"envFrom of an added container", map[string]any{"containers": []any{map[string]any{"name": "side", "envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "db"}}}}}},
			`user "declarer" may not get secrets "db"` + tail},
		{"a ConfigMap volume she may read", map[string]any{"volumes": []any{map[string]any{"name": "cfg", "configMap": map[string]any{"name": "settings"}}}}, ""},
		{"a projected ConfigMap she may not read", map[string]any{"volumes": []any{map[string]any{"name": "cfg", "projected": map[string]any{"sources": []any{map[string]any{"configMap": map[string]any{"name": "other"}}}}}}},
			`user "declarer" may not get configmaps "other"` + tail},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := as(t, env.Config, "declarer").Resource(envBindings).Namespace(ns).Create(ctx, envBinding(ns, fmt.Sprintf("d%d", i), map[string]any{"subject": subject, "add": tc.add}), metav1.CreateOptions{})
			if tc.refusal == "" {
				checkRefusal(t, "create", err, "")
				return
			}
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.refusal) {
				t.Errorf("create: got %v, want Forbidden containing %q", err, tc.refusal)
			}
		})
	}
}
