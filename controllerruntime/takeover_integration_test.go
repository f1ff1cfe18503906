package controllerruntime_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	bindkitcr "github.com/bindkit/bindkit/controllerruntime"
	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/wiring"
)

// grant binds rules to user for the test's length: cluster-wide, or in
// namespace when it is not empty. It returns a function that replaces
// the rules.
func grant(t *testing.T, env *testenv.Environment, user, namespace string, rules []rbacv1.PolicyRule) (replace func([]rbacv1.PolicyRule)) {
	t.Helper()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	if namespace == "" {
		roles := admin.RbacV1().ClusterRoles()
		if _, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { roles.Delete(context.Background(), user, metav1.DeleteOptions{}) })
		bindings := admin.RbacV1().ClusterRoleBindings()
		if _, err := bindings.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bindings.Delete(context.Background(), user, metav1.DeleteOptions{}) })
		return func(rules []rbacv1.PolicyRule) {
			if _, err := roles.Update(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return nil
}

// as returns the control plane's config acting as user.
func as(env *testenv.Environment, user string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// exampleRBAC is the controller-runtime example's RBAC, the grants of a
// Manager that binds a kind as bindkit kubebuilder create binding
// generates them (its markers, written by make manifests): its
// ClusterRole and the Roles in the Manager's namespace.
const exampleRBAC = "examples/githubbinding/config/rbac/"

// exampleWebhookConfiguration is the example's webhook configuration
// name, which its ClusterRole grants by name.
const exampleWebhookConfiguration = "githubbindings.bindings.bindkit.dev"

// documentedRules are what the documentation grants a Manager that binds
// kind, a declarative kind: the ClusterRole of the example's (a code
// kind's) config/rbac/role.yaml, read from the file with the example's
// resource and names made kind's, and what README adds for a declarative
// kind: its MutatingAdmissionPolicy by name, their bindings, create on the
// subjects' kinds for the probes' dry runs. Namespaces: list and watch,
// no get. createSubjects false leaves that create out. inNamespace are
// the rules of the example's Roles (role.yaml's and
// leader_election_role.yaml's), for the Manager's namespace.
func documentedRules(t *testing.T, kind *wiring.Kind, createSubjects bool) (cluster, inNamespace []rbacv1.PolicyRule) {
	t.Helper()
	subjectKinds := []string{"deployments", "cronjobs"}
	for _, file := range []string{"role.yaml", "leader_election_role.yaml"} {
		data, err := os.ReadFile(exampleRBAC + file)
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(data), "\n---\n") {
			var role struct {
				Kind  string              `json:"kind"`
				Rules []rbacv1.PolicyRule `json:"rules"`
			}
			if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if role.Kind == "Role" {
				inNamespace = append(inNamespace, role.Rules...)
				continue
			}
			for _, rule := range role.Rules {
				for i, r := range rule.Resources {
					rule.Resources[i] = strings.ReplaceAll(r, "githubbindings", kind.GVR.Resource)
				}
				for i, n := range rule.ResourceNames {
					if n == exampleWebhookConfiguration {
						rule.ResourceNames[i] = kind.WebhookConfigurationName
						continue
					}
					rule.ResourceNames[i] = strings.ReplaceAll(n, "githubbindings", kind.GVR.Resource)
				}
				if createSubjects && slices.ContainsFunc(rule.Resources, func(r string) bool { return slices.Contains(subjectKinds, r) }) {
					rule.Verbs = append(rule.Verbs, "create")
				}
				cluster = append(cluster, rule)
			}
		}
	}
	if len(cluster) == 0 || len(inNamespace) == 0 {
		t.Fatalf("no ClusterRole or no Role in %s", exampleRBAC)
	}
	// README, "admission by MutatingAdmissionPolicy". A create names no
	// object when it is authorized, so resourceNames cannot limit it:
	// create is granted apart, as for the namespace guard.
	mapName := policy.MutatingPolicyName(kind.GVR.GroupResource())
	return append(cluster,
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingadmissionpolicies"},
			ResourceNames: []string{mapName}, Verbs: []string{"get", "list", "watch", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingadmissionpolicies"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingadmissionpolicybindings"},
			Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
	), inNamespace
}

// replica is one Manager of the test's two.
type replica struct {
	name    string
	mgr     ctrl.Manager
	webhook int
	probes  int
	log     *testenv.LogBuffer
	cancel  context.CancelFunc
	stopped chan struct{} // closed when Start has returned err
	err     error
}

func (r *rig) replica(t *testing.T, name string, cfg *rest.Config, kind *wiring.Kind, sys system) *replica {
	t.Helper()
	rep := &replica{name: name, log: &testenv.LogBuffer{}, stopped: make(chan struct{})}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(rep.log), zap.DebugLevel))
	rep.mgr, rep.webhook, rep.probes = r.manager(t, cfg, ctrl.Options{
		LeaderElection: true, LeaderElectionID: "takeover.bindkit.dev", LeaderElectionNamespace: sys.namespace,
		// As a SIGKILL leaves it: the next leader waits for the lease to expire.
		LeaderElectionReleaseOnCancel: false,
	}, bindkitcr.Options{Kinds: []*wiring.Kind{kind}, Logger: logger}, sys)
	return rep
}

func (rep *replica) start() {
	ctx, cancel := context.WithCancel(context.Background())
	rep.cancel = cancel
	go func() {
		rep.err = rep.mgr.Start(ctx)
		close(rep.stopped)
	}()
}

// stop cancels the Manager's context and waits for Start to return.
func (rep *replica) stop(t *testing.T) {
	if rep.cancel == nil {
		return
	}
	rep.cancel()
	select {
	case <-rep.stopped:
		if rep.err != nil {
			t.Errorf("%s: %v", rep.name, rep.err)
		}
	case <-time.After(time.Minute):
		t.Errorf("%s did not stop within a minute", rep.name)
	}
	rep.cancel = nil
}

// logged counts the lines of rep's bindkit log at level holding msg.
func (rep *replica) logged(level, msg string) int {
	n := 0
	for line := range strings.SplitSeq(rep.log.String(), "\n") {
		if strings.Contains(line, `"level":"`+level+`"`) && strings.Contains(line, msg) {
			n++
		}
	}
	return n
}

const inForce = "admission policy seen in force: the webhook leaves the path"

// TestTakeoverUnderDocumentedRBACCompletesTheHandover runs two Managers
// binding SinkBindings (a declarative kind: admitted by
// MutatingAdmissionPolicy, its webhook in the path until probes see the
// policy in force) as one identity holding only the documented RBAC
// (impersonated, on the real kube-apiserver; namespaces: list and watch,
// no get), under leader election. The leader hands admission over to the
// policy; it stops without releasing its lease (as a SIGKILL leaves it);
// the other takes over, puts its webhook back in the path and takes it
// out again. Then create on the subjects' kinds is revoked and the
// policy's binding deleted, so the leader restores it and probes again:
// the refusal is an error in its log, a Warning event on the Binding and
// a failing readiness check, and the webhook stays in the path; the grant
// restored, the leader is ready again and the webhook leaves.
//
// Before the fix the probe read each Binding's namespace with a get,
// which the documented RBAC refuses, and took the refusal for "nothing to
// probe": no leader ever took the webhook out of the path, and nothing
// was logged.
func TestTakeoverUnderDocumentedRBACCompletesTheHandover(t *testing.T) {
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	r := newRig(t)
	sys := r.system(t)
	const user = "bindkit-documented"
	clusterRules, systemRules := documentedRules(t, kind, true)
	replaceRules := grant(t, r.env, user, "", clusterRules)
	grant(t, r.env, user, sys.namespace, systemRules)
	withoutCreate, _ := documentedRules(t, kind, false)
	cfg := as(r.env, user)

	a := r.replica(t, "replica a", cfg, kind, sys)
	b := r.replica(t, "replica b", cfg, kind, sys)
	r.installWebhook(t, kind, testenv.Forwarder(t, a.webhook, b.webhook))

	ns := r.env.CreateNamespace(t, "takeover-")
	r.create(t, kind, ns, "sink", map[string]any{
		"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
		"sink":    "https://sink.example.com/takeover",
	}, nil)
	t.Cleanup(func() {
		// While b leads, so that it removes the Binding's finalizer.
		r.deleteBindings(t, []*wiring.Kind{kind})
		a.stop(t)
		b.stop(t)
		if t.Failed() {
			t.Logf("replica a's bindkit log:\n%s\nreplica b's bindkit log:\n%s", a.log.String(), b.log.String())
		}
	})

	a.start()
	poll(t, 2*time.Minute, "replica a to hand admission over to the policy", func() string {
		if a.logged("info", inForce) == 0 {
			return "not yet"
		}
		return r.webhookRules(t, kind)
	})
	step("a handed over")
	r.boundAtAdmission(t, ns)

	b.start()
	poll(t, time.Minute, "replica b's readiness", func() string {
		if code, body := check(b.probes, "readyz/"+bindkitcr.ReadyzCheckName); code != 200 {
			return body
		}
		return ""
	})
	a.stop(t)
	step("a stopped, its lease held")
	poll(t, 2*time.Minute, "replica b to take over and hand admission over to the policy", func() string {
		if b.logged("info", inForce) == 0 {
			return "not yet"
		}
		return r.webhookRules(t, kind)
	})
	step("b took over and handed over")
	if n := b.logged("error", "refused"); n > 0 {
		t.Errorf("replica b logged %d refusals under the documented RBAC", n)
	}
	r.boundAtAdmission(t, ns)

	// A refusal on the probe's path.
	replaceRules(withoutCreate)
	r.deletePolicyBindings(t, kind)
	poll(t, time.Minute, "replica b to report the refusal: its readiness failing", func() string {
		code, body := check(b.probes, "readyz/"+bindkitcr.ReadyzCheckName)
		if code == 200 || !strings.Contains(body, "probe of the admission path refused") {
			return body
		}
		return ""
	})
	step("b unready for the refusal")
	if b.logged("error", "probe of the admission path refused") == 0 {
		t.Error("replica b logged no error for the refusal")
	}
	if rules := r.webhookRules(t, kind); rules == "" {
		t.Error("the webhook left the path although the probes were refused")
	}
	poll(t, time.Minute, "a Warning event on the Binding", func() string {
		events, err := r.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "sink", "reason": wiring.ReasonAdmissionProbeRefused}.String()})
		if err != nil {
			return err.Error()
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, `cannot create resource "deployments"`) {
				return ""
			}
		}
		return fmt.Sprintf("%d events", len(events.Items))
	})
	step("event recorded")

	replaceRules(clusterRules)
	poll(t, time.Minute, "replica b ready again, the webhook out of the path", func() string {
		if code, body := check(b.probes, "readyz/"+bindkitcr.ReadyzCheckName); code != 200 {
			return body
		}
		return r.webhookRules(t, kind)
	})
	step("b ready, handed over again")
}

// webhookRules says what rules kind's webhook configuration has, "" when
// none: the webhook is out of the path.
func (r *rig) webhookRules(t *testing.T, kind *wiring.Kind) string {
	cfg, err := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), kind.WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	for _, w := range cfg.Webhooks {
		if len(w.Rules) > 0 {
			return fmt.Sprintf("webhook %s in the path: %d rules", w.Name, len(w.Rules))
		}
	}
	return ""
}

// boundAtAdmission checks that a Deployment the SinkBinding selects is
// bound at its (dry-run) create.
func (r *rig) boundAtAdmission(t *testing.T, ns string) {
	t.Helper()
	poll(t, time.Minute, "a new subject bound at admission", func() string {
		d, err := r.deployment(t, ns, "probe-web", map[string]string{"app": "web"}, 0, metav1.DryRunAll)
		if err != nil {
			return err.Error()
		}
		if got := envOf(d, sinkv1alpha1.SinkEnv); got != "https://sink.example.com/takeover" {
			return fmt.Sprintf("%s=%q", sinkv1alpha1.SinkEnv, got)
		}
		return ""
	})
}

// deletePolicyBindings deletes the bindings of kind's policy, which the
// leader restores.
func (r *rig) deletePolicyBindings(t *testing.T, kind *wiring.Kind) {
	t.Helper()
	api := r.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	name := policy.MutatingPolicyName(kind.GVR.GroupResource())
	list, err := api.List(t.Context(), metav1.ListOptions{LabelSelector: policy.PolicyLabel + "=" + policy.PolicyLabelValue(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatalf("no binding of policy %s", name)
	}
	for _, b := range list.Items {
		if err := api.Delete(t.Context(), b.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
