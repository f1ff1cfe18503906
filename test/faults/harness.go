package faults

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/webhook"
)

// Names the harness uses: those of config/ and the githubbinding example.
const (
	SystemNamespace = demo.SystemNamespace
	ConfigName      = demo.WebhookConfigName
	SecretName      = webhook.DefaultSecretName
	// CRDPath is the GithubBinding CRD, relative to the repository root.
	CRDPath = demo.CRDPath
)

// Keys are the certificates Secret's data keys.
var Keys = certificates.DefaultDataKeys()

// Harness is the githubbinding controller binary running against a real
// kube-apiserver, installed as config/ installs it.
type Harness struct {
	T        testing.TB
	Env      *testenv.Environment
	Kube     kubernetes.Interface
	Dyn      dynamic.Interface
	RepoRoot string
	// Port is the webhook's port on 127.0.0.1 of the process StartProcess
	// started last, as it reported it.
	Port     int
	binary   string
	proc     *demo.Controller
	mu       sync.Mutex
	bindings []*unstructured.Unstructured // created, to delete before the process stops
}

// Start builds the controller once per test binary (into env.Dir, which
// the control plane's Stop removes), installs the system namespace, starts
// the controller with args after the harness's own flags, installs
// config/'s MutatingWebhookConfiguration, reached by URL at the port the
// controller reported (Port: it binds one the kernel picks), and waits
// until the webhook is ready. Cleanup, registered on t, deletes the Bindings the
// harness created while the controller still runs (so their finalizers go),
// stops it with SIGTERM and removes the configuration and the Secret.
func Start(t testing.TB, env *testenv.Environment, repoRoot string, args ...string) *Harness {
	t.Helper()
	binary, err := demo.BuiltFor(env, repoRoot, demo.ControllerPackage, "githubbinding-controller")
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{T: t, Env: env, RepoRoot: repoRoot, binary: binary,
		Kube: kubernetes.NewForConfigOrDie(env.Config), Dyn: dynamic.NewForConfigOrDie(env.Config)}
	ctx := context.Background()
	if _, err := h.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(h.cleanup)
	h.startProcess(args)
	h.InstallConfiguration()
	h.waitReady()
	return h
}

// StartProcess starts the controller (again) and waits until it is ready.
// The new process binds a port the kernel picks, so the installed
// configuration, where it reached the previous process, is pointed at the
// new one, as a Service follows a restarted pod.
func (h *Harness) StartProcess(args ...string) {
	h.T.Helper()
	previous := h.Port
	h.startProcess(args)
	if err := demo.PointWebhookConfiguration(context.Background(), h.Kube, ConfigName, previous, h.Port); err != nil {
		h.T.Fatal(err)
	}
	h.waitReady()
}

// startProcess starts the controller with args and sets Port to the port
// its webhook reported.
func (h *Harness) startProcess(args []string) {
	h.T.Helper()
	proc, err := demo.StartController(h.Env, h.binary, args...)
	if err != nil {
		h.T.Fatal(err)
	}
	h.proc, h.Port = proc, proc.WebhookPort
}

// waitReady waits until the process's webhook is ready.
func (h *Harness) waitReady() {
	h.T.Helper()
	if err := demo.WaitReady(context.Background(), h.Kube, h.Port, 60*time.Second); err != nil {
		h.T.Fatalf("%v\nlog:\n%s", err, h.proc.LogTail(40))
	}
}

// StartReplica starts another controller process, a second replica beside
// the harness's own, with its webhook on its own port, and returns it; the
// caller stops it. Unlike StartProcess it does not wait for readiness: a
// replica that follows serves its webhook only once the leader wrote the
// certificates.
func (h *Harness) StartReplica(args ...string) (proc *demo.Controller, port int) {
	h.T.Helper()
	proc, err := demo.StartController(h.Env, h.binary, args...)
	if err != nil {
		h.T.Fatal(err)
	}
	return proc, proc.WebhookPort
}

// Service stands in for a Service in front of replicas: it forwards each
// TCP connection to the first of ports that accepts it, as kube-proxy sends
// traffic only to ready endpoints, and points the webhook configuration at
// itself. It stops at cleanup.
func (h *Harness) Service(ports ...int) {
	h.T.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.T.Fatal(err)
	}
	var wg sync.WaitGroup
	h.T.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { forward(conn, ports) })
		}
	})
	cfg, err := h.Configuration()
	if err != nil {
		h.T.Fatal(err)
	}
	for i := range cfg.Webhooks {
		url := fmt.Sprintf("https://%s/githubbindings", ln.Addr())
		cfg.Webhooks[i].ClientConfig.URL = &url
	}
	if _, err := h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(context.Background(), cfg, metav1.UpdateOptions{}); err != nil {
		h.T.Fatal(err)
	}
}

// forward copies conn to and from the first port that accepts a
// connection.
func forward(conn net.Conn, ports []int) {
	defer conn.Close()
	for _, port := range ports {
		backend, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil {
			continue
		}
		defer backend.Close()
		done := make(chan struct{}, 2)
		go func() { io.Copy(backend, conn); done <- struct{}{} }()
		go func() { io.Copy(conn, backend); done <- struct{}{} }()
		<-done
		return
	}
}

// RunOnce runs the controller binary with args (after the harness's own
// flags) until it exits, at most timeout, and returns its log and how it
// exited: for a mode that does its work and ends, such as --uninstall.
func (h *Harness) RunOnce(timeout time.Duration, args ...string) (string, error) {
	h.T.Helper()
	proc, err := demo.StartController(h.Env, h.binary, args...)
	if err != nil {
		h.T.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if exited, err := proc.Exited(); exited {
			return proc.Log(), err
		}
		time.Sleep(100 * time.Millisecond)
	}
	proc.Kill()
	return proc.Log(), fmt.Errorf("still running after %v; killed", timeout)
}

// Process is the controller process StartProcess started, nil once
// stopped.
func (h *Harness) Process() *demo.Controller { return h.proc }

// KillProcess kills the controller with SIGKILL, as a crashed node would.
func (h *Harness) KillProcess() {
	if h.proc != nil {
		h.proc.Kill()
		h.proc = nil
	}
}

// StopProcess stops the controller with SIGTERM and expects a clean exit.
func (h *Harness) StopProcess() {
	h.T.Helper()
	if h.proc == nil {
		return
	}
	if err := h.proc.Stop(); err != nil {
		h.T.Errorf("%v\nlog:\n%s", err, h.proc.LogTail(40))
	}
	h.proc = nil
}

// Log is the running (or last) controller's log.
func (h *Harness) Log() string {
	if h.proc == nil {
		return ""
	}
	return h.proc.Log()
}

func (h *Harness) cleanup() {
	ctx := context.Background()
	h.mu.Lock()
	bindings := h.bindings
	h.mu.Unlock()
	client := h.Dyn.Resource(v1alpha1.GroupVersionResource())
	for _, b := range bindings {
		client.Namespace(b.GetNamespace()).Delete(ctx, b.GetName(), metav1.DeleteOptions{})
	}
	if h.proc != nil {
		// The reconciler releases the finalizers before the process stops.
		wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, b := range bindings {
				if _, err := client.Namespace(b.GetNamespace()).Get(ctx, b.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	// The configuration goes before the process: with failurePolicy Fail a
	// stopped webhook would block later tests' creates.
	h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, ConfigName, metav1.DeleteOptions{})
	if h.T.Failed() && h.proc != nil {
		h.T.Logf("controller log (tail):\n%s", h.proc.LogTail(60))
	}
	h.StopProcess()
	h.Kube.CoreV1().Secrets(SystemNamespace).Delete(ctx, SecretName, metav1.DeleteOptions{})
}

// InstallConfiguration creates config/'s MutatingWebhookConfiguration,
// reached by URL, as an administrator applies it.
func (h *Harness) InstallConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	h.T.Helper()
	cfg, err := demo.WebhookConfiguration(h.RepoRoot, h.Port)
	if err != nil {
		h.T.Fatal(err)
	}
	created, err := h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{})
	if err != nil {
		h.T.Fatalf("install %s: %v", demo.WebhookConfigPath, err)
	}
	return created
}

// Configuration reads the installed configuration's one webhook.
func (h *Harness) Configuration() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), ConfigName, metav1.GetOptions{})
}

// Namespace creates a namespace with a generated name, removed (as far as
// a control plane without a namespace controller goes) at cleanup.
func (h *Harness) Namespace(prefix string) string {
	h.T.Helper()
	return h.Env.CreateNamespace(h.T, prefix)
}

// Binding creates GithubBinding name in ns for Deployments labelled
// app=selects (or, with subjectNS set, naming that namespace), mounting
// Secret github-token.
func (h *Harness) Binding(ns, name, selects, subjectNS string) {
	h.T.Helper()
	if err := h.CreateBinding(ns, name, selects, subjectNS); err != nil {
		h.T.Fatal(err)
	}
}

// CreateBinding is Binding returning the create's error instead of
// failing the test, for creates the kube-apiserver may refuse (the
// namespace guard refuses a subject in another namespace).
func (h *Harness) CreateBinding(ns, name, selects, subjectNS string) error {
	subject := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"selector": map[string]any{"matchLabels": map[string]any{"app": selects}}}
	if subjectNS != "" {
		subject["namespace"] = subjectNS
	}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"subject": subject, "secret": map[string]any{"name": "github-token"}},
	}}
	created, err := h.Dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(context.Background(), b, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create GithubBinding %s/%s: %w", ns, name, err)
	}
	h.mu.Lock()
	h.bindings = append(h.bindings, created)
	h.mu.Unlock()
	return nil
}

// DeleteBinding deletes a GithubBinding and waits until it is gone.
func (h *Harness) DeleteBinding(ns, name string) {
	h.T.Helper()
	client := h.Dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns)
	if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.T.Fatal(err)
	}
	h.Eventually(fmt.Sprintf("GithubBinding %s/%s gone", ns, name), 30*time.Second, func() (string, error) {
		if _, err := client.Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err), nil
		}
		return "", nil
	})
}

// Eventually polls cond every 50ms until it returns "" or timeout passes;
// cond says what it still waits for.
func (h *Harness) Eventually(what string, timeout time.Duration, cond func() (string, error)) time.Duration {
	h.T.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var err error
		last, err = cond()
		return last == "" && err == nil, err
	})
	if err != nil {
		h.T.Fatalf("%s: %v (last: %s)", what, err, last)
	}
	return time.Since(start)
}

// Deployment is a Deployment labelled app=app.
func Deployment(ns, name, app string) *appsv1.Deployment {
	labels := map[string]string{"app": app}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
}

// Bound reports whether the Binding's volume is in the pod template.
func Bound(d *appsv1.Deployment) bool {
	return slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == v1alpha1.VolumeName })
}

// WaitAdmissionBinds waits until a dry-run create of a Deployment labelled
// app=app in ns comes back bound: the webhook is in force there.
func (h *Harness) WaitAdmissionBinds(ns, app string) {
	h.T.Helper()
	h.Eventually("admission binds in "+ns, 60*time.Second, func() (string, error) {
		got, err := h.Kube.AppsV1().Deployments(ns).Create(context.Background(), Deployment(ns, "probe", app), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error(), nil
		}
		if !Bound(got) {
			return "not bound yet", nil
		}
		return "", nil
	})
}

// Load is concurrent dry-run creates of Deployments that a Binding
// selects, each of which the kube-apiserver sends through the webhook.
type Load struct {
	attempts, ok atomic.Int64
	mu           sync.Mutex
	failures     []string
	stop         chan struct{}
	wg           sync.WaitGroup
}

// StartLoad starts creators goroutines, each creating Deployments labelled
// app=app in ns with a dry run, one after another with pause between its
// creates (none when 0), until Stop. A create fails when the API server
// refuses it or returns it unbound. An unpaused load keeps the API server
// as busy as the machine allows; a test that needs only a steady sample of
// admissions pauses, and leaves the cores to the tests beside it.
func (h *Harness) StartLoad(ns, app string, creators int, pause time.Duration) *Load {
	l := &Load{stop: make(chan struct{})}
	for i := range creators {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				wait := time.Duration(0)
				if n > 0 {
					wait = pause
				}
				select {
				case <-l.stop:
					return
				case <-time.After(wait):
				}
				l.attempts.Add(1)
				name := "load-" + strconv.Itoa(i) + "-" + strconv.Itoa(n)
				got, err := h.Kube.AppsV1().Deployments(ns).Create(context.Background(), Deployment(ns, name, app), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				switch {
				case err != nil:
					l.fail(fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), name, err))
				case !Bound(got):
					l.fail(fmt.Sprintf("%s %s: created unbound", time.Now().Format("15:04:05.000"), name))
				default:
					l.ok.Add(1)
				}
			}
		})
	}
	return l
}

func (l *Load) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, msg)
}

// Stop ends the load and returns how many creates were attempted and the
// failures.
func (l *Load) Stop() (attempts int64, failures []string) {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts.Load(), slices.Clone(l.failures)
}

// Attempts and OK count so far.
func (l *Load) Attempts() int64 { return l.attempts.Load() }

// OK counts the creates that came back bound.
func (l *Load) OK() int64 { return l.ok.Load() }

// Failures so far.
func (l *Load) Failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.failures)
}

// Secret reads the certificates Secret; nil when it does not exist.
func (h *Harness) Secret() (*corev1.Secret, error) {
	s, err := h.Kube.CoreV1().Secrets(SystemNamespace).Get(context.Background(), SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

// ServingCert parses the Secret's serving certificate; nil when it has
// none.
func ServingCert(s *corev1.Secret) *x509.Certificate {
	if s == nil {
		return nil
	}
	kp, err := certificates.ParseKeyPair(s.Data[Keys.ServerCert], s.Data[Keys.ServerKey])
	if err != nil {
		return nil
	}
	return kp.Cert
}

// Bundle parses the Secret's CA bundle.
func Bundle(s *corev1.Secret) []*x509.Certificate {
	if s == nil {
		return nil
	}
	certs, _ := certificates.ParseCertificates(s.Data[Keys.CACert])
	return certs
}

// Served returns the certificate the webhook presents now, read with a
// TLS handshake that checks nothing.
func (h *Harness) Served() (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(h.Port)),
		&tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("no certificate presented")
	}
	return certs[0], nil
}

// SignedBy reports whether cert chains to ca at now.
func SignedBy(cert, ca *x509.Certificate) bool {
	return cert != nil && ca != nil && cert.CheckSignatureFrom(ca) == nil
}

// PublishedBundle parses the caBundle of the configuration's webhook.
func (h *Harness) PublishedBundle() ([]*x509.Certificate, error) {
	cfg, err := h.Configuration()
	if err != nil {
		return nil, err
	}
	if len(cfg.Webhooks) == 0 {
		return nil, nil
	}
	return certificates.ParseCertificates(cfg.Webhooks[0].ClientConfig.CABundle)
}

// Ready returns the Ready condition of GithubBinding ns/name, and whether
// it describes the Binding's current generation.
func (h *Harness) Ready(ns, name string) (metav1.Condition, bool, error) {
	u, err := h.Dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return metav1.Condition{}, false, err
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == duck.ConditionReady {
			return metav1.Condition{Type: duck.ConditionReady, Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
				Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])}, observed == u.GetGeneration(), nil
		}
	}
	return metav1.Condition{}, false, nil
}

// WaitReady waits until GithubBinding ns/name reports Ready status and
// reason for its current generation, and returns the condition and how
// long that took; it fails the test after timeout.
func (h *Harness) WaitReady(ns, name string, status metav1.ConditionStatus, reason string, timeout time.Duration) (metav1.Condition, time.Duration) {
	h.T.Helper()
	var got metav1.Condition
	took := h.Eventually(fmt.Sprintf("GithubBinding %s/%s %s/%s", ns, name, status, reason), timeout, func() (string, error) {
		c, current, err := h.Ready(ns, name)
		got = c
		if err != nil || !current || c.Status != status || c.Reason != reason {
			return fmt.Sprintf("Ready %s/%s (current generation: %v)", c.Status, c.Reason, current), err
		}
		return "", nil
	})
	return got, took
}

// DenyUpdates denies updates of Deployments labelled app=guarded, with a
// ValidatingAdmissionPolicy, until remove is called or the test ends: a
// cause of failure outside the controller's reach. It returns once the
// policy is in force.
func (h *Harness) DenyUpdates() (remove func()) {
	t := h.T
	t.Helper()
	ctx := context.Background()
	name := "deny-guarded-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(name) > 60 {
		name = name[:60]
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.metadata.labels) || !('app' in object.metadata.labels) || object.metadata.labels['app'] != 'guarded'", Message: "guarded for the test"}},
		},
	}
	vap := h.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := vap.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	bindings := h.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		bindings.Delete(context.Background(), name, metav1.DeleteOptions{})
		vap.Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	t.Cleanup(remove)
	// The policy is in force once an update of a guarded object is denied.
	probe := Deployment(h.Namespace("guard-probe-"), "probe", "guarded")
	if _, err := h.Kube.AppsV1().Deployments(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.Eventually("policy in force", 30*time.Second, func() (string, error) {
		_, err := h.Kube.AppsV1().Deployments(probe.Namespace).Patch(ctx, "probe", types.MergePatchType, []byte(`{"metadata":{"annotations":{"probe":"x"}}}`), metav1.PatchOptions{})
		if err == nil {
			return "update allowed", nil
		}
		return "", nil
	})
	return remove
}
