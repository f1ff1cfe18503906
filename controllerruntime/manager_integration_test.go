package controllerruntime_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	bindkitcr "github.com/bindkit/bindkit/controllerruntime"
	"github.com/bindkit/bindkit/envtest"
	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/fixturebinding"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/wiring"
)

// controlPlane runs workloads (kube-scheduler, kwok nodes), for rollouts
// gated on pods' readiness, and serves the fixture and SinkBinding CRDs.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads: true,
	CRDPaths:  []string{"../" + fixturebinding.CRDPath, "../examples/sinkbinding/config/300-sinkbinding.yaml"},
}}

var logs testenv.LogBuffer

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(&logs)))
	controlPlane.Main(m)
}

// rig is a Manager with kinds added by bindkitcr.Add, its webhook server
// on 127.0.0.1 with the certificate of a Secret as cert-manager writes it,
// the kinds' webhook configurations pointed at it, against a real
// kube-apiserver.
type rig struct {
	env  *testenv.Environment
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func start(t *testing.T, kinds ...*wiring.Kind) *rig {
	t.Helper()
	r, mgr, probePort := newManager(t, nil, ctrl.Options{}, bindkitcr.Options{Kinds: kinds})
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		r.deleteBindings(t, kinds)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the Manager did not stop within a minute")
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", logs.String())
		}
	})
	// The Manager's /readyz, with bindkit's check (informers synced,
	// admission ready).
	poll(t, time.Minute, "the Manager's readiness", func() string {
		if code, body := check(probePort, "readyz/"+bindkitcr.ReadyzCheckName); code != http.StatusOK {
			return body
		}
		return ""
	})
	return r
}

// newManager builds a Manager on cfg (the control plane's admin when
// nil) with opts in a system namespace of its own, its kinds' webhook
// configurations pointed at its webhook server, and bindkit added with
// bo. It does not start it.
func newManager(t *testing.T, cfg *rest.Config, opts ctrl.Options, bo bindkitcr.Options) (r *rig, mgr ctrl.Manager, probePort int) {
	t.Helper()
	r = newRig(t)
	sys := r.system(t)
	mgr, webhookPort, probePort := r.manager(t, cfg, opts, bo, sys)
	for _, k := range bo.Kinds {
		r.installWebhook(t, k, webhookPort)
	}
	return r, mgr, probePort
}

func newRig(t *testing.T) *rig {
	env := controlPlane.Env(t)
	return &rig{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}
}

// system is a namespace the Managers of a test run in, with the
// certificate of their webhook servers in a Secret as cert-manager writes
// it and in files (certDir).
type system struct {
	namespace, certDir string
}

func (r *rig) system(t *testing.T) system {
	t.Helper()
	sys := system{namespace: r.env.CreateNamespace(t, "manager-system-"), certDir: t.TempDir()}
	cert, err := testenv.NewServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM} {
		if err := os.WriteFile(filepath.Join(sys.certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sys.namespace, Name: bindkitcr.DefaultCertificatesSecret},
		Data: map[string][]byte{"ca.crt": cert.CAPEM, "tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM}}
	if _, err := r.kube.CoreV1().Secrets(sys.namespace).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return sys
}

// manager builds a Manager on cfg (the control plane's admin when nil)
// with opts, running in sys: its webhook server on 127.0.0.1:webhookPort
// with sys's certificate, its probes on probePort, bindkit added with bo
// (SystemNamespace and MetricsRegistry filled in). It does not start it.
func (r *rig) manager(t *testing.T, cfg *rest.Config, opts ctrl.Options, bo bindkitcr.Options, sys system) (mgr ctrl.Manager, webhookPort, probePort int) {
	t.Helper()
	if cfg == nil {
		cfg = r.env.Config
	}
	// controller-runtime's webhook server takes a port number, not port 0
	// (which it reads as its default), and reports no port it bound: a
	// port free now, which another process could take before the Manager
	// binds it (bindkit's own processes bind port 0 instead).
	webhookPort, err := envtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if probePort, err = envtest.FreePort(); err != nil {
		t.Fatal(err)
	}
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", probePort)
	opts.WebhookServer = crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: webhookPort, CertDir: sys.certDir})
	if mgr, err = ctrl.NewManager(cfg, opts); err != nil {
		t.Fatal(err)
	}
	bo.SystemNamespace, bo.MetricsRegistry = sys.namespace, prometheus.NewRegistry()
	if err := bindkitcr.Add(mgr, bo); err != nil {
		t.Fatal(err)
	}
	return mgr, webhookPort, probePort
}

// check asks the Manager's probe server on port for path ("readyz",
// "readyz/bindkit", "healthz"): its status code and body, or 0 and the
// error.
func check(port int, path string) (int, string) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/%s", port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// installWebhook installs kind's webhook configuration, no rules and no
// caBundle, pointed at the Manager's webhook server; the test's cleanup
// deletes it.
func (r *rig) installWebhook(t *testing.T, kind *wiring.Kind, port int) {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, kind.WebhookPath)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kind.WebhookConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: kind.WebhookName, AdmissionReviewVersions: []string{"v1"},
			SideEffects: new(admissionregistrationv1.SideEffectClassNone), FailurePolicy: new(admissionregistrationv1.Fail),
			TimeoutSeconds: new(int32(10)), ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
		}},
	}
	api := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
}

// deleteBindings deletes every Binding of kinds while the Manager runs,
// and waits until they are gone (their subjects unbound).
func (r *rig) deleteBindings(t *testing.T, kinds []*wiring.Kind) {
	for _, k := range kinds {
		client := r.dyn.Resource(k.GVR)
		list, err := client.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Errorf("list %s: %v", k.GVR.Resource, err)
			continue
		}
		for _, item := range list.Items {
			client.Namespace(item.GetNamespace()).Delete(context.Background(), item.GetName(), metav1.DeleteOptions{})
		}
		err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := client.List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("%s still there a minute after their deletion", k.GVR.Resource)
		}
	}
}

// deployment creates ns/name, with dryRun (metav1.DryRunAll) a server-side
// dry run: admitted as a create is, not stored.
func (r *rig) deployment(t *testing.T, ns, name string, labels map[string]string, replicas int32, dryRun ...string) (*appsv1.Deployment, error) {
	t.Helper()
	pod := map[string]string{"deployment": name}
	return r.kube.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: pod},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}, metav1.CreateOptions{DryRun: dryRun})
}

// condition returns the Ready condition's status, reason and message of
// the Binding ns/name of gvr ("" when it has none yet).
func (r *rig) ready(t *testing.T, k *wiring.Kind, ns, name string) (status, reason, message string) {
	t.Helper()
	u, err := r.dyn.Resource(k.GVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return "", "", err.Error()
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		if c["type"] == "Ready" {
			return fmt.Sprint(c["status"]), fmt.Sprint(c["reason"]), fmt.Sprint(c["message"])
		}
	}
	return "", "", ""
}

func (r *rig) create(t *testing.T, k *wiring.Kind, ns, name string, spec, annotations map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k.GVK.GroupVersion().String(), "kind": k.GVK.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": annotations},
		"spec":     spec,
	}}
	if _, err := r.dyn.Resource(k.GVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func poll(t *testing.T, timeout time.Duration, what string, check func() string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}

func envOf(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

const panicLabel = "fixture.bindkit.dev/panic"

// TestPanickingDoIsContainedInTheManager: a Binding whose Do panics on
// one subject, inside a Manager, ends neither the Manager nor the work of
// anything else. The Binding is not Ready, naming the panic; its other
// subject is bound; admission refuses only the subject it panics on and
// binds the others at creation; the Manager stays ready throughout.
func TestPanickingDoIsContainedInTheManager(t *testing.T) {
	kind, err := fixturebinding.New(fixturebinding.Kind)
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, kind)
	ns := r.env.CreateNamespace(t, "containment-")
	env := fixturebinding.EnvName(fixturebinding.Kind)
	for name, labels := range map[string]map[string]string{"calm": {"app": "web"}, "bomb": {"app": "web", panicLabel: "true"}} {
		if _, err := r.deployment(t, ns, name, labels, 0); err != nil {
			t.Fatal(err)
		}
	}
	r.create(t, kind, ns, "bad", map[string]any{
		"subject":      map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
		"panicOnLabel": panicLabel,
	}, nil)
	poll(t, time.Minute, "the Binding not Ready for its panic", func() string {
		status, reason, message := r.ready(t, kind, ns, "bad")
		if status != "False" || reason != psbinding.ReasonBindingPanicked || !strings.Contains(message, "fixture panic on "+ns+"/bomb") {
			return fmt.Sprintf("Ready %s %s %q", status, reason, message)
		}
		return ""
	})
	poll(t, time.Minute, "calm bound", func() string {
		d, err := r.kube.AppsV1().Deployments(ns).Get(t.Context(), "calm", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if envOf(d, env) != "bad" {
			return "calm not bound"
		}
		return ""
	})
	// The kube-apiserver loads the webhook configuration some time after the
	// Manager programs it (rules, caBundle, this namespace): probe first.
	poll(t, time.Minute, "admission to bind a calm subject", func() string {
		d, err := r.deployment(t, ns, "calm-probe", map[string]string{"app": "web"}, 0, metav1.DryRunAll)
		if err != nil {
			return err.Error()
		}
		if envOf(d, env) != "bad" {
			return fmt.Sprintf("calm-probe admitted unbound: %v", d.Spec.Template.Spec.Containers[0].Env)
		}
		return ""
	})
	poll(t, time.Minute, "admission to refuse a subject the Binding panics on", func() string {
		_, err := r.deployment(t, ns, "bomb-probe", map[string]string{"app": "web", panicLabel: "true"}, 0, metav1.DryRunAll)
		if err == nil {
			return "bomb-probe admitted"
		}
		if !strings.Contains(err.Error(), "fixture panic on "+ns+"/bomb-probe") {
			return err.Error()
		}
		return ""
	})
	_, err = r.deployment(t, ns, "bomb-2", map[string]string{"app": "web", panicLabel: "true"}, 0)
	if err == nil || !strings.Contains(err.Error(), "fixture panic on "+ns+"/bomb-2") {
		t.Errorf("create of a subject the Binding panics on: %v, want a refusal naming the panic", err)
	}
	calm, err := r.deployment(t, ns, "calm-2", map[string]string{"app": "web"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if envOf(calm, env) != "bad" {
		t.Errorf("calm-2 not bound at admission: %v", calm.Spec.Template.Spec.Containers[0].Env)
	}
	r.audit(t, ns, fixturebinding.AuditKind(fixturebinding.Kind))
}

// TestRolloutHaltsInTheManager: a rollout paced two at a time whose
// sidecar never becomes Ready halts after its first wave inside the
// Manager, names the halted subjects and rolls them back; the others are
// never touched.
func TestRolloutHaltsInTheManager(t *testing.T) {
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, kind)
	ns := r.env.CreateNamespace(t, "rollout-")
	for i := range 6 {
		if _, err := r.deployment(t, ns, fmt.Sprintf("app-%d", i), map[string]string{"app": "web"}, 1); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 2*time.Minute, "the Deployments to roll out", func() string {
		list, err := r.kube.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, d := range list.Items {
			if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 1 || d.Status.AvailableReplicas != 1 {
				return d.Name + " not rolled out"
			}
		}
		return ""
	})
	r.create(t, kind, ns, "sink", map[string]any{
		"subject":        map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
		"sink":           "https://sink.example.com/halt",
		"forwarderImage": envtest.FailingImage,
	}, map[string]any{psbinding.RolloutMaxChangingAnnotation: "2", psbinding.RolloutDeadlineAnnotation: "15s", psbinding.RolloutRollbackAnnotation: "true"})
	poll(t, 2*time.Minute, "the rollout to halt", func() string {
		status, reason, message := r.ready(t, kind, ns, "sink")
		if status != "False" || reason != psbinding.ReasonRolloutHalted {
			return fmt.Sprintf("Ready %s %s %q", status, reason, message)
		}
		return ""
	})
	poll(t, 2*time.Minute, "the halted subjects rolled back and the others untouched", func() string {
		list, err := r.kube.AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, d := range list.Items {
			if n := len(d.Spec.Template.Spec.Containers); n != 1 || envOf(&d, sinkv1alpha1.SinkEnv) != "" {
				return fmt.Sprintf("%s: %d containers, %s=%q", d.Name, n, sinkv1alpha1.SinkEnv, envOf(&d, sinkv1alpha1.SinkEnv))
			}
		}
		return ""
	})
	r.audit(t, ns)
}
