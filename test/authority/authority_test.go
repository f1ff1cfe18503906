package authority_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/duck"
	githubv1alpha1 "github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// kind is an example Binding kind as the scenario writes it.
type kind struct {
	name     string
	resource schema.GroupVersionResource
	kind     string
	// spec is a harmless spec naming subject; edited, one with another
	// value of the kind's own field.
	spec func(subject map[string]any, edited bool) map[string]any
	// pkg is its example binary; configDir its config/.
	pkg, configDir string
}

var (
	githubBinding = kind{
		name: "githubbinding", resource: githubv1alpha1.GroupVersionResource(), kind: "GithubBinding",
		spec: func(subject map[string]any, edited bool) map[string]any {
			secret := "github-token"
			if edited {
				secret = "stolen-token"
			}
			return map[string]any{"subject": subject, "secret": map[string]any{"name": secret}}
		},
		pkg: "./examples/githubbinding/cmd/controller", configDir: "config",
	}
	sinkBinding = kind{
		name: "sinkbinding", resource: sinkv1alpha1.GroupVersionResource(), kind: "SinkBinding",
		spec: func(subject map[string]any, edited bool) map[string]any {
			sink := "http://events.example.com"
			if edited {
				sink = "http://attacker.example.net"
			}
			return map[string]any{"subject": subject, "sink": sink}
		},
		pkg: "./examples/sinkbinding/cmd/controller", configDir: "examples/sinkbinding/config",
	}
)

// TestBindingCarriesItsAuthorsAuthorityWithRealAPIServer writes Bindings
// of both examples as users with fewer rights than the controller, on
// every admission path: a code kind by webhook with its binary running, a
// declarative kind by MutatingAdmissionPolicy with its binary running and
// then with no process at all, and a kind installed from config/ whose
// process never ran. Each time: a user who may not patch a Deployment
// (which runs under its own ServiceAccount) cannot create a Binding that
// reaches it, nor edit a colleague's Binding, nor bind by selector, nor
// reach past a resourceName-limited grant; the refusal is one line naming
// the user, the verb, the resource and the name; no workload changes, and
// one created later carries nothing. A user whose grants (the aggregated
// edit role) let her patch the Deployment creates the same Binding, and
// the record names her.
func TestBindingCarriesItsAuthorsAuthorityWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	// The install: each kind's aggregated roles.
	for _, k := range []kind{githubBinding, sinkBinding} {
		applyFile(t, env, filepath.Join(root, k.configDir, "320-"+k.name+"-roles.yaml"))
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	t.Run("installed from config/, no process ever ran", func(t *testing.T) {
		applyFile(t, env, filepath.Join(root, githubBinding.configDir, "310-githubbinding-admission-policies.yaml"))
		scenario(t, env, githubBinding, false)
	})
	t.Run("code kind, webhook, binary running", func(t *testing.T) {
		stop := run(t, env, root, githubBinding, "500-webhook-configuration.yaml")
		defer stop()
		scenario(t, env, githubBinding, true)
	})
	t.Run("declarative kind, admission policy, binary running", func(t *testing.T) {
		stop := run(t, env, root, sinkBinding, "500-webhook-configuration.yaml")
		waitPolicyAdmission(t, kube)
		scenario(t, env, sinkBinding, true)
		stop()
		// The kube-apiserver alone admits now: the same again.
		t.Run("then no process", func(t *testing.T) {
			scenario(t, env, sinkBinding, false)
		})
	})
}

// scenario is the test's walk for k in a namespace of its own; reconciled
// says a process binds the subjects of allowed Bindings.
func scenario(t *testing.T, env *testenv.Environment, k kind, reconciled bool) {
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	admin := dynamic.NewForConfigOrDie(env.Config).Resource(k.resource)
	ns := env.CreateNamespace(t, "authority-")
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "victim-runner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{deployment(ns, "victim", "victim-runner"), deployment(ns, "mine", "")} {
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitAvailable(t, kube, ns, "victim")

	resource := k.resource.Resource
	binding := rbacv1.PolicyRule{APIGroups: []string{k.resource.Group}, Resources: []string{resource}, Verbs: []string{"create", "update", "get", "list"}}
	grant(t, kube, ns, "mallory", binding, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}})
	grant(t, kube, ns, "ronly", binding, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"mine"}, Verbs: []string{"get", "patch"}})
	editor(t, kube, ns, "owner", k.resource.GroupResource())

	named := func(name string) map[string]any {
		return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
	}
	selector := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"tier": "victims"}}}
	refusal := func(user, name string) string {
		target := `"` + name + `"`
		if name == "" {
			target = "(every name: the subject selects by label)"
		}
		return fmt.Sprintf(`user "%s" may not patch deployments.apps %s in namespace "%s", which this Binding's subject names; a Binding changes only what its author may`, user, target, ns)
	}
	before := templateOf(t, kube, ns, "victim")
	// Until the kube-apiserver has loaded the policies (a second after
	// they are written), a write would pass: probe with dry runs.
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	poll(t, "the authority policy in force", func() (bool, error) {
		_, err := as(env, "mallory").Resource(k.resource).Namespace(ns).Create(ctx, object(k, ns, "probe", k.spec(named("victim"), false)), dryRun)
		return apierrors.IsForbidden(err), nil
	})
	poll(t, "the requested-by record in force", func() (bool, error) {
		b, err := as(env, "owner").Resource(k.resource).Namespace(ns).Create(ctx, object(k, ns, "probe", k.spec(named("victim"), false)), dryRun)
		return err == nil && b.GetAnnotations()[policy.RequestedByAnnotation] == "owner", nil
	})

	// A colleague's harmless Binding, on a Deployment of the colleague's.
	if _, err := admin.Namespace(ns).Create(ctx, object(k, ns, "colleague", k.spec(named("mine"), false)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, user, binding string
		spec                map[string]any
		create              bool // else an update of the colleague's Binding
		refusal             string
	}{
		{"create reaching a Deployment she may not patch", "mallory", "sidecar", k.spec(named("victim"), true), true, refusal("mallory", "victim")},
		{"create by selector", "mallory", "everyone", k.spec(selector, true), true, refusal("mallory", "")},
		{"edit a colleague's Binding to reach it", "mallory", "colleague", k.spec(named("victim"), true), false, refusal("mallory", "victim")},
		{"edit a colleague's Binding's value", "mallory", "colleague", k.spec(named("mine"), true), false, refusal("mallory", "mine")},
		{"patch granted on another name", "ronly", "other", k.spec(named("victim"), true), true, refusal("ronly", "victim")},
		{"patch granted on one name, bind by selector", "ronly", "all", k.spec(selector, true), true, refusal("ronly", "")},
		{"patch granted on that name", "ronly", "own", k.spec(named("mine"), false), true, ""},
		{"patch granted on that name, an edit", "ronly", "colleague", k.spec(named("mine"), true), false, ""},
	}
	for _, tc := range cases {
		client := as(env, tc.user).Resource(k.resource).Namespace(ns)
		var err error
		if tc.create {
			_, err = client.Create(ctx, object(k, ns, tc.binding, tc.spec), metav1.CreateOptions{})
		} else {
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				b, err := client.Get(ctx, tc.binding, metav1.GetOptions{})
				if err != nil {
					return err
				}
				b.Object["spec"] = tc.spec
				_, err = client.Update(ctx, b, metav1.UpdateOptions{})
				return err
			})
		}
		checkRefusal(t, tc.name, err, tc.refusal)
	}

	// Nothing reached the Deployment; one created now carries nothing.
	if after := templateOf(t, kube, ns, "victim"); after != before {
		t.Errorf("victim changed: generation and template\n%s\nthen\n%s", before, after)
	}
	created, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "later", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := created.Annotations[duck.BoundAnnotation]; a != "" {
		t.Errorf("a Deployment created after the refusals came back bound: %s=%q", duck.BoundAnnotation, a)
	}

	// The same Binding from a user whose grants let her patch it.
	if _, err := as(env, "owner").Resource(k.resource).Namespace(ns).Create(ctx, object(k, ns, "sidecar", k.spec(named("victim"), true)), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create by owner (edit, which may patch the Deployment): %v", err)
	}
	b, err := admin.Namespace(ns).Get(ctx, "sidecar", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.GetAnnotations()[policy.RequestedByAnnotation]; got != "owner" {
		t.Errorf("%s = %q, want owner", policy.RequestedByAnnotation, got)
	}
	if reconciled {
		poll(t, "the owner's Binding to bind victim and say who asked", func() (bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "victim", metav1.GetOptions{})
			if err != nil || !strings.Contains(d.Annotations[duck.BoundAnnotation], "/sidecar@") {
				return false, err
			}
			events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=sidecar,reason=" + psbinding.ReasonBindingApplied})
			if err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if strings.Contains(e.Message, "requested by owner") {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// deployment is one replica of an app labelled app=<name> and
// tier=victims, running as serviceAccount unless it is empty.
func deployment(ns, name, serviceAccount string) *appsv1.Deployment {
	labels := map[string]string{"app": name, "tier": "victims"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: serviceAccount,
					Containers:         []corev1.Container{{Name: "app", Image: "registry.example.com/app:v1"}},
				},
			},
		},
	}
}

func object(k kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k.resource.GroupVersion().String(), "kind": k.kind,
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     spec,
	}}
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

// templateOf is a Deployment's generation and pod template, for
// comparison.
func templateOf(t *testing.T, kube kubernetes.Interface, ns, name string) string {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := json.Marshal(d.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("generation %d, annotations %v: %s", d.Generation, d.Annotations, tmpl)
}

// run starts k's example binary with its default flags, points its
// webhook configuration (webhookFile in k's config/) at it, and waits
// until its authority policy is in force; stop stops it.
func run(t *testing.T, env *testenv.Environment, root string, k kind, webhookFile string) (stop func()) {
	t.Helper()
	binary, err := demo.BuiltFor(env, root, k.pkg, k.name+"-controller")
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	cfg, err := demo.WebhookConfigurationAt(filepath.Join(root, k.configDir, webhookFile), ctrl.WebhookPort)
	if err == nil {
		err = demo.InstallWebhookConfiguration(t.Context(), kube, cfg)
	}
	if err != nil {
		ctrl.Kill()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := ctrl.Stop(); err != nil {
			t.Errorf("stop %s: %v", k.name, err)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", k.name, ctrl.LogTail(60))
		}
	}
	t.Cleanup(stop)
	name := policy.AuthorityName(k.resource.GroupResource())
	poll(t, "the leader to program "+name, func() (bool, error) {
		_, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return stop
}

// waitPolicyAdmission waits until the declarative kind's webhook has left
// the path: its admission policy is in force.
func waitPolicyAdmission(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	name := policy.MutatingPolicyName(sinkBinding.resource.GroupResource())
	poll(t, "the declarative kind's admission policy "+name, func() (bool, error) {
		_, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// as is a client acting as user, with only the rights RBAC grants them.
func as(env *testenv.Environment, user string) dynamic.Interface {
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return dynamic.NewForConfigOrDie(c)
}

// grant gives user rules in namespace.
func grant(t *testing.T, kube kubernetes.Interface, namespace, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, kube, namespace, user, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user})
}

// editor gives user Kubernetes' edit role in namespace, and waits until
// the role aggregates the Binding kind gr.
func editor(t *testing.T, kube kubernetes.Interface, namespace, user string, gr schema.GroupResource) {
	t.Helper()
	bind(t, kube, namespace, user, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"})
	poll(t, "the edit role to aggregate "+gr.String(), func() (bool, error) {
		role, err := kube.RbacV1().ClusterRoles().Get(t.Context(), "edit", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if g == gr.Group && res == gr.Resource {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
}

func bind(t *testing.T, kube kubernetes.Interface, namespace, user string, ref rbacv1.RoleRef) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    ref,
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitAvailable waits until a Deployment's pods run.
func waitAvailable(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	poll(t, "Deployment "+name+" available", func() (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas > 0, nil
	})
}

// applyFile server-side applies every object of a YAML file, as kubectl
// apply -f does.
func applyFile(t *testing.T, env *testenv.Environment, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, gvk, err)
		}
		body, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			client = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := client.Patch(t.Context(), obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatalf("%s: apply %s %s: %v", path, gvk.Kind, obj.GetName(), err)
		}
	}
}

func poll(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var last error
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}
