package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/test/testenv"
)

// What kustomize's config/default makes of the scaffolded project's
// names (namePrefix regions-, namespace regions-system), and what the
// scaffolded RegionBinding's Do adds to a pod template.
const (
	mgrNamespace      = "regions-system"
	mgrServiceAccount = "regions-controller-manager"
	boundAnnotation   = "region.example.com/regionbinding"
	// cacheSyncTimeout is what the scaffolded main leaves bindkit's
	// CacheSyncTimeout at: the Manager sets none, so sharedmain's.
	cacheSyncTimeout = 2 * time.Minute
)

var regionBindings = schema.GroupVersionResource{Group: "region.example.com", Version: "v1", Resource: "regionbindings"}

// checkManagerRuns runs the project's Manager as a user runs it: the
// binary go build makes of ./cmd, two replicas with --leader-elect,
// against a control plane whose Deployments run pods (envtest
// Workloads), holding only the RBAC make manifests generated (config/rbac
// as kustomize builds it into config/default), bound to the Manager's
// ServiceAccount, which the replicas impersonate. It checks that a
// RegionBinding binds an existing Deployment (reconciler) and a new one
// (webhook) and their pods roll out; that after the leader is SIGKILLed
// the other replica takes over and completes the handover without a
// refusal; and that a replica whose caches cannot sync stops, at once on
// SIGTERM and with an error at its CacheSyncTimeout.
func checkManagerRuns(t *testing.T, dir, kustomize string) {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "manager")
	runOrFail(t, dir, nil, "go", "build", "-o", binary, "./cmd")
	r := newManagerRig(t, binary)
	a, b := r.replica(t, "replica a"), r.replica(t, "replica b")
	r.install(t, dir, kustomize, testenv.Forwarder(t, a.webhook, b.webhook))
	a.start(t)
	b.start(t)
	a.waitReady(t)
	b.waitReady(t)
	ns := r.env.CreateNamespace(t, "regions-")
	r.checkBinds(t, ns)
	survivor := r.checkTakeover(t, ns, a, b)
	survivor.terminate(t, 30*time.Second)
	if !survivor.cmd.ProcessState.Success() {
		t.Errorf("%s on SIGTERM: %v, want exit 0\n%s", survivor.name, survivor.cmd.ProcessState, survivor.log.Tail(40))
	}
	r.checkStopsWhenCachesCannotSync(t)
}

// managerRig is the control plane the Manager runs against, and how its
// replicas are run.
type managerRig struct {
	env        *envtest.Environment
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	binary     string
	kubeconfig string // the admin's, impersonating the Manager's ServiceAccount
	certDir    string // the webhook server's certificate, as cert-manager's Secret is mounted
}

// newManagerRig starts a control plane with running pods and writes the
// kubeconfig the replicas use: the admin's credentials impersonating the
// Manager's ServiceAccount, so that they hold only the rights RBAC grants
// it, as in its pod.
func newManagerRig(t *testing.T, binary string) *managerRig {
	t.Helper()
	env, err := envtest.Start(t.Context(), envtest.Options{Workloads: true})
	if err != nil {
		t.Fatalf("control plane with workloads: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	r := &managerRig{env: env, binary: binary, certDir: t.TempDir(),
		kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}
	cfg, err := clientcmd.LoadFromFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + mgrNamespace + ":" + mgrServiceAccount
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + mgrNamespace, "system:authenticated"}
	}
	r.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, r.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return r
}

// install does what a user's install does but run the Manager's pods:
// the CRDs of config/crd/bases; config/default as kustomize builds it
// (the namespace, the ServiceAccount, the generated Roles and their
// bindings, bindkit's webhook configuration and admission policies),
// without the Deployment (run here as processes), the Service, the
// NetworkPolicy and cert-manager's objects, and with bindkit's webhook
// configuration pointed at webhookPort on 127.0.0.1 (the replicas'
// forwarder) instead of the Service; then, as cert-manager would, the
// Secret webhook-server-cert, whose ca.crt bindkit publishes as the
// caBundle. kubebuilder's own webhook configuration (the Region
// defaulter, which needs cert-manager's CA injection) is left out.
func (r *managerRig) install(t *testing.T, dir, kustomize string, webhookPort int) {
	t.Helper()
	crds, err := filepath.Glob(filepath.Join(dir, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("config/crd/bases: %v, %d CRDs", err, len(crds))
	}
	if err := r.env.InstallCRDs(t.Context(), crds...); err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(r.kube.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, u := range installed(t, runOrFail(t, dir, nil, kustomize, "build", "config/default"), webhookPort) {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
		if _, err := r.dyn.Resource(m.Resource).Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
	r.writeCertificate(t)
}

// installKinds are the kinds of config/default that install applies.
var installKinds = []string{"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
	"MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}

// installed returns the objects of the kustomize build out that install
// applies, in kustomize's order (namespaces first), bindkit's webhook
// configuration calling https://127.0.0.1:webhookPort.
func installed(t *testing.T, out string, webhookPort int) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("kustomize build config/default: %v", err)
		}
		if !slices.Contains(installKinds, u.GetKind()) {
			continue
		}
		if u.GetKind() == "MutatingWebhookConfiguration" {
			if u.GetLabels()["app.kubernetes.io/managed-by"] != "bindkit" {
				continue
			}
			pointAt(t, u, webhookPort)
		}
		objs = append(objs, u)
	}
}

// pointAt replaces each webhook's Service by a URL on 127.0.0.1:port
// with the Service's path, as the Service routes to a replica.
func pointAt(t *testing.T, u *unstructured.Unstructured, port int) {
	t.Helper()
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for _, h := range hooks {
		hook := h.(map[string]any)
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		hook["clientConfig"] = map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d%s", port, path)}
	}
	if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
}

// writeCertificate does cert-manager's part: the Secret
// webhook-server-cert in the Manager's namespace (ca.crt, tls.crt,
// tls.key) and its files where the replicas' --webhook-cert-path reads
// them, as the Deployment mounts the Secret.
func (r *managerRig) writeCertificate(t *testing.T) {
	t.Helper()
	cert, err := envtest.NewServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM} {
		if err := os.WriteFile(filepath.Join(r.certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: mgrNamespace, Name: "webhook-server-cert"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": cert.CAPEM, "tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM},
	}
	if _, err := r.kube.CoreV1().Secrets(mgrNamespace).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// managerProcess is one replica: the Manager binary run with the flags
// and environment its Deployment gives it (config/default), on ports of
// its own.
type managerProcess struct {
	name                   string
	probe, webhook, metric int
	cmd                    *exec.Cmd
	log                    *testenv.LogBuffer
	started                time.Time
	exited                 chan struct{} // closed once the process has exited
}

// replica picks a replica's ports; start runs it.
func (r *managerRig) replica(t *testing.T, name string) *managerProcess {
	t.Helper()
	p := &managerProcess{name: name, log: &testenv.LogBuffer{}, exited: make(chan struct{})}
	for _, port := range []*int{&p.probe, &p.webhook, &p.metric} {
		var err error
		if *port, err = envtest.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cmd = exec.CommandContext(ctx, r.binary,
		"--leader-elect",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p.metric),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", p.probe),
		fmt.Sprintf("--webhook-port=%d", p.webhook),
		"--webhook-cert-path="+r.certDir)
	ownProcessGroup(p.cmd)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+r.kubeconfig, "SYSTEM_NAMESPACE="+mgrNamespace)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	t.Cleanup(func() {
		// Killed with its process group if it still runs; its log when the
		// test failed.
		cancel()
		if p.cmd.Process != nil {
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s's log (last lines):\n%s", p.name, p.log.Tail(80))
		}
	})
	return p
}

func (p *managerProcess) start(t *testing.T) {
	t.Helper()
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
}

// waitReady waits until the replica's /readyz (bindkit's check among
// them) answers 200.
func (p *managerProcess) waitReady(t *testing.T) {
	t.Helper()
	mgrPoll(t, 2*time.Minute, p.name+" ready", func() string {
		if p.hasExited() {
			t.Fatalf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, p.log.Tail(40))
		}
		code, body := p.get("readyz")
		if code != http.StatusOK {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
}

func (p *managerProcess) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// get returns the status and body of the replica's probe endpoint path.
func (p *managerProcess) get(path string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/%s", p.probe, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// terminate sends SIGTERM, as the kubelet stops a pod, and waits up to
// within for the process to exit; longer fails the test.
func (p *managerProcess) terminate(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.exited:
		return time.Since(sent)
	case <-time.After(within):
		t.Fatalf("%s still runs %s after SIGTERM\n%s", p.name, within, p.log.Tail(40))
		return 0
	}
}

// lines returns the lines of the replica's log holding s, ignoring case.
func (p *managerProcess) lines(s string) []string {
	var out []string
	for line := range strings.SplitSeq(p.log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), strings.ToLower(s)) {
			out = append(out, line)
		}
	}
	return out
}

// mgrPoll calls check until it returns "" or timeout passes, then fails
// with what it last said.
func mgrPoll(t *testing.T, timeout time.Duration, what string, check func() string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

// webDeployment is a Deployment of two pods that the test's RegionBinding
// selects (app=web).
func webDeployment(ns, name string) *appsv1.Deployment {
	pod := map[string]string{"deployment": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: pod},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/web:1"}}},
			},
		},
	}
}

// notRolledOut says how Deployment ns/name differs from bound to binding
// ("": unbound) and rolled out: its template's annotation, the
// controller's status, and its live pods', each Ready; "" when it is.
func (r *managerRig) notRolledOut(ctx context.Context, ns, name, binding string) string {
	d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if got := d.Spec.Template.Annotations[boundAnnotation]; got != binding {
		return fmt.Sprintf("%s: template %s=%q, want %q", name, boundAnnotation, got, binding)
	}
	want, s := *d.Spec.Replicas, d.Status
	if s.ObservedGeneration < d.Generation || s.Replicas != want || s.UpdatedReplicas != want || s.ReadyReplicas != want {
		return fmt.Sprintf("%s: rolling out: generation %d observed %d, replicas %d updated %d ready %d of %d",
			name, d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, want)
	}
	pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "deployment=" + name})
	if err != nil {
		return err.Error()
	}
	var live int32
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		if got := p.Annotations[boundAnnotation]; got != binding || !podReady(&p) {
			return fmt.Sprintf("pod %s: %s=%q (want %q), ready %v", p.Name, boundAnnotation, got, binding, podReady(&p))
		}
	}
	if live != want {
		return fmt.Sprintf("%s: %d live pods, want %d", name, live, want)
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRolledOut waits until each Deployment named is bound to binding
// ("": unbound) and rolled out.
func (r *managerRig) waitRolledOut(t *testing.T, ns, binding string, names ...string) {
	t.Helper()
	mgrPoll(t, 2*time.Minute, fmt.Sprintf("%v bound to %q and rolled out", names, binding), func() string {
		for _, name := range names {
			if msg := r.notRolledOut(t.Context(), ns, name, binding); msg != "" {
				return msg
			}
		}
		return ""
	})
}

// createBound creates Deployment ns/name once its admission binds it (a
// dry run first: until the leader has programmed the webhook, with the
// caBundle, a create is refused or left unbound), and checks the object
// the create returned carries the binding.
func (r *managerRig) createBound(t *testing.T, ns, name, binding string) {
	t.Helper()
	api := r.kube.AppsV1().Deployments(ns)
	mgrPoll(t, 2*time.Minute, name+" bound at admission (dry run)", func() string {
		d, err := api.Create(t.Context(), webDeployment(ns, name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error()
		}
		if got := d.Spec.Template.Annotations[boundAnnotation]; got != binding {
			return fmt.Sprintf("%s=%q", boundAnnotation, got)
		}
		return ""
	})
	d, err := api.Create(t.Context(), webDeployment(ns, name), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment %s: %v", name, err)
	}
	if got := d.Spec.Template.Annotations[boundAnnotation]; got != binding {
		t.Errorf("Deployment %s as created: %s=%q, want %q: admission did not bind it", name, boundAnnotation, got, binding)
	}
}

// checkBinds creates a Deployment, then a RegionBinding selecting app=web
// (the reconciler binds the Deployment), then a second Deployment (the
// webhook binds it): both bound, their pods rolled out and Ready.
func (r *managerRig) checkBinds(t *testing.T, ns string) {
	t.Helper()
	if _, err := r.kube.AppsV1().Deployments(ns).Create(t.Context(), webDeployment(ns, "existing"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitRolledOut(t, ns, "", "existing")
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "region.example.com/v1", "kind": "RegionBinding",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{"subject": map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}},
	}}
	if _, err := r.dyn.Resource(regionBindings).Namespace(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RegionBinding: %v", err)
	}
	r.waitRolledOut(t, ns, "web", "existing")
	r.createBound(t, ns, "created", "web")
	r.waitRolledOut(t, ns, "web", "created")
}

// leader returns the replica whose log says it acquired the lease, when
// one does.
func leader(replicas ...*managerProcess) *managerProcess {
	for _, p := range replicas {
		if !p.hasExited() && len(p.lines("successfully acquired lease")) > 0 {
			return p
		}
	}
	return nil
}

// checkTakeover SIGKILLs the leader (its lease left held) and checks the
// other replica takes over: it acquires the lease, its webhook binds a
// Deployment created then, and its reconciler unbinds the subjects of the
// RegionBinding deleted then and removes its finalizer. Under the
// generated RBAC no replica may have been refused anything ("forbidden"
// in its log). It returns the survivor.
func (r *managerRig) checkTakeover(t *testing.T, ns string, a, b *managerProcess) *managerProcess {
	t.Helper()
	var lead *managerProcess
	mgrPoll(t, time.Minute, "a replica to lead", func() string {
		if lead = leader(a, b); lead == nil {
			return "no replica logged that it acquired the lease"
		}
		return ""
	})
	survivor := a
	if lead == a {
		survivor = b
	}
	if err := lead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-lead.exited
	killed := time.Now()
	mgrPoll(t, 2*time.Minute, survivor.name+" to acquire the lease", func() string {
		if leader(survivor) == nil {
			return "not yet"
		}
		return ""
	})
	t.Logf("%s killed; %s took the lease %s later", lead.name, survivor.name, time.Since(killed).Round(time.Second))
	r.createBound(t, ns, "after-takeover", "web")
	r.waitRolledOut(t, ns, "web", "after-takeover")
	if err := r.dyn.Resource(regionBindings).Namespace(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mgrPoll(t, 2*time.Minute, "the RegionBinding gone (its finalizer removed)", func() string {
		_, err := r.dyn.Resource(regionBindings).Namespace(ns).Get(t.Context(), "web", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("get: %v", err)
		}
		return ""
	})
	r.waitRolledOut(t, ns, "", "existing", "created", "after-takeover")
	for _, p := range []*managerProcess{lead, survivor} {
		if refused := p.lines("forbidden"); len(refused) > 0 {
			t.Errorf("%s was refused under the generated RBAC:\n%s", p.name, strings.Join(refused, "\n"))
		}
	}
	return survivor
}

// checkStopsWhenCachesCannotSync narrows the generated Roles in the
// Manager's namespace so that bindkit's ConfigMap cache cannot sync (no
// configmaps: role.yaml's Role grants them for bindkit, and kubebuilder's
// leader-election Role grants them too), and starts two replicas: one
// gets SIGTERM once its readiness says bindkit's informers have not
// synced and must exit at once, cleanly; the other must exit with an
// error naming the ConfigMaps within the Manager's CacheSyncTimeout (the
// scaffolded main leaves the default).
func (r *managerRig) checkStopsWhenCachesCannotSync(t *testing.T) {
	t.Helper()
	roles := r.kube.RbacV1().Roles(mgrNamespace)
	list, err := roles.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range list.Items {
		var rules []rbacv1.PolicyRule
		for _, rule := range role.Rules {
			rule.Resources = slices.DeleteFunc(rule.Resources, func(r string) bool { return r == "configmaps" })
			if len(rule.Resources) > 0 {
				rules = append(rules, rule)
			}
		}
		role.Rules = rules
		if _, err := roles.Update(t.Context(), &role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, d := r.replica(t, "replica c"), r.replica(t, "replica d")
	for _, p := range []*managerProcess{c, d} {
		p.start(t)
	}
	for _, p := range []*managerProcess{c, d} {
		mgrPoll(t, time.Minute, p.name+"'s readiness to say bindkit's informers have not synced", func() string {
			if p.hasExited() {
				t.Fatalf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, p.log.Tail(40))
			}
			if code, body := p.get("readyz/bindkit"); code != http.StatusInternalServerError || !strings.Contains(body, "informers have not synced") {
				return fmt.Sprintf("%d %s", code, body)
			}
			return ""
		})
	}
	// A guard, well below the Manager's 30 s graceful-shutdown period.
	took := c.terminate(t, 10*time.Second)
	t.Logf("%s, its caches unsynced, exited %s after SIGTERM: %v", c.name, took.Round(time.Millisecond), c.cmd.ProcessState)
	if !c.cmd.ProcessState.Success() {
		t.Errorf("%s on SIGTERM before its caches synced: %v, want exit 0\n%s", c.name, c.cmd.ProcessState, c.log.Tail(40))
	}
	select {
	case <-d.exited:
	case <-time.After(time.Until(d.started.Add(cacheSyncTimeout + 30*time.Second))):
		t.Fatalf("%s still runs %s after it started, past its CacheSyncTimeout of %s", d.name, time.Since(d.started).Round(time.Second), cacheSyncTimeout)
	}
	t.Logf("%s exited %s after it started: %v", d.name, time.Since(d.started).Round(time.Second), d.cmd.ProcessState)
	if d.cmd.ProcessState.Success() || len(d.lines("ConfigMaps in namespace "+mgrNamespace)) == 0 {
		t.Errorf("%s: %v, want a failure naming the ConfigMaps in %s\n%s", d.name, d.cmd.ProcessState, mgrNamespace, d.log.Tail(40))
	}
}
