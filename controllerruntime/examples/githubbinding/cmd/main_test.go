package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/tracker"
)

// controlPlane serves the GithubBinding CRD as config/crd installs it.
var controlPlane = testenv.Shared{Options: testenv.Options{
	CRDPaths: []string{"../config/crd/bases/bindings.bindkit.dev_githubbindings.yaml"},
}}

// logs holds what every Manager of the test binary logged (controller-runtime's
// logger is process-wide); a failed test prints it.
var logs syncBuffer

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(&logs)))
	controlPlane.Main(m)
}

// manager is the example's main, run in the test's process as the
// deployment runs it (config/manager: --leader-elect, the certificate
// cert-manager wrote mounted in --webhook-cert-path), against a real
// kube-apiserver that calls its webhook over TLS.
type manager struct {
	webhookPort, probePort int
	cancel                 context.CancelFunc
	done                   chan error
	stopOnce               sync.Once
	stopErr                error
}

// installation is what the deployment installs before the Managers run:
// the system namespace, cert-manager's Secret and the webhook
// configuration of config/webhook.
type installation struct {
	env       *testenv.Environment
	kube      kubernetes.Interface
	namespace string
	cert      *testenv.ServingCert
	certDir   string
}

// install creates the system namespace and, as cert-manager would, the
// Secret webhook-server-cert (ca.crt, tls.crt, tls.key), its files in a
// directory for the webhook server, and the webhook configuration of
// config/webhook with no caBundle: bindkit fills it in. Cleanup deletes
// the configuration.
func install(t *testing.T) *installation {
	t.Helper()
	env := controlPlane.Env(t)
	in := &installation{env: env, kube: kubernetes.NewForConfigOrDie(env.Config), namespace: env.CreateNamespace(t, "githubbinding-system-"), certDir: t.TempDir()}
	cert, err := testenv.NewServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	in.cert = cert
	for name, data := range map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM} {
		if err := os.WriteFile(filepath.Join(in.certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.namespace, Name: "webhook-server-cert"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": cert.CAPEM, "tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM},
	}
	if _, err := in.kube.CoreV1().Secrets(in.namespace).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    WebhookName,
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           new(admissionregistrationv1.Fail),
			TimeoutSeconds:          new(int32(10)),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: new("https://127.0.0.1:1" + WebhookPath)},
		}},
	}
	if _, err := in.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := in.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), WebhookConfigurationName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete webhook configuration: %v", err)
		}
	})
	return in
}

// pointWebhookAt points the webhook configuration's URL at port, as a
// Service would route to a replica.
func (in *installation) pointWebhookAt(t *testing.T, port int) {
	t.Helper()
	api := in.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := api.Get(t.Context(), WebhookConfigurationName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cfg.Webhooks[0].ClientConfig.URL = new(fmt.Sprintf("https://127.0.0.1:%d%s", port, WebhookPath))
		_, err = api.Update(t.Context(), cfg, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// start runs the example's main with the deployment's flags until the
// test ends, and waits until its readiness probe answers 200.
func (in *installation) start(t *testing.T, registry prometheus.Registerer) *manager {
	t.Helper()
	m := &manager{webhookPort: freePort(t), probePort: freePort(t), done: make(chan error, 1)}
	f := registerFlags(newFlagSet())
	f.metricsAddr = "0"
	f.probeAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(m.probePort))
	f.webhookHost, f.webhookPort = "127.0.0.1", m.webhookPort
	f.certPath = in.certDir
	f.enableLeaderElection = true
	f.leaderElectionNamespace, f.namespace = in.namespace, in.namespace
	f.registry = registry
	cfg := *in.env.Config
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- run(ctx, &cfg, f) }()
	t.Cleanup(func() {
		if err := m.stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("managers' log:\n%s", logs.String())
		}
	})
	poll(t, time.Minute, "the manager to be ready", func() string {
		select {
		case err := <-m.done:
			m.done <- err
			t.Fatalf("the manager stopped: %v", err)
		default:
		}
		return probe(fmt.Sprintf("http://127.0.0.1:%d/readyz", m.probePort))
	})
	return m
}

// stop cancels the Manager's context, as SIGTERM does, and returns what
// run returned.
func (m *manager) stop() error {
	m.stopOnce.Do(func() {
		m.cancel()
		select {
		case m.stopErr = <-m.done:
		case <-time.After(time.Minute):
			m.stopErr = errors.New("run did not return within a minute of cancellation")
		}
	})
	return m.stopErr
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("manager", flag.ContinueOnError) }

func probe(url string) string {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	return ""
}

// freePort is a port of 127.0.0.1 free now: controller-runtime's servers
// take a port number (0 means their default) and report none they bound.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := envtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// poll calls check until it returns "" or timeout passes, then fails
// with what it last said.
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

// syncBuffer is a bytes.Buffer safe for concurrent loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	pod := map[string]string{"deployment": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: pod},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
}

func githubBinding(ns, name string, subject tracker.Reference) *v1alpha1.GithubBinding {
	return &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersionResource().GroupVersion().String(), Kind: "GithubBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.GithubBindingSpec{Subject: subject, Secret: corev1.LocalObjectReference{Name: "gh-token"}},
	}
}

// bound reports how d's pod template differs from bound (or unbound): ""
// when the Binding's secret volume and its mount in the container are
// there (or not).
func bound(d *appsv1.Deployment, want bool) string {
	spec := d.Spec.Template.Spec
	has := len(spec.Volumes) == 1 && spec.Volumes[0].Name == v1alpha1.VolumeName &&
		len(spec.Containers[0].VolumeMounts) == 1 && spec.Containers[0].VolumeMounts[0].MountPath == v1alpha1.MountPath
	none := len(spec.Volumes) == 0 && len(spec.Containers[0].VolumeMounts) == 0
	switch {
	case want && !has:
		return fmt.Sprintf("%s not bound: volumes %v, mounts %v", d.Name, spec.Volumes, spec.Containers[0].VolumeMounts)
	case !want && !none:
		return fmt.Sprintf("%s still bound: volumes %v, mounts %v", d.Name, spec.Volumes, spec.Containers[0].VolumeMounts)
	}
	return ""
}

// waitBound waits until each Deployment named is bound (or unbound).
func waitBound(t *testing.T, kube kubernetes.Interface, ns string, want bool, names ...string) {
	t.Helper()
	poll(t, time.Minute, fmt.Sprintf("%v bound=%v", names, want), func() string {
		for _, name := range names {
			d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if msg := bound(d, want); msg != "" {
				return msg
			}
		}
		return ""
	})
}

// TestCRDIsTheFrameworks: config/crd holds the framework's GithubBinding
// CRD, unchanged (kustomize reads no file outside its directory).
func TestCRDIsTheFrameworks(t *testing.T) {
	ours, err := os.ReadFile("../config/crd/bases/bindings.bindkit.dev_githubbindings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile("../../../../config/300-githubbinding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(theirs), string(ours)); diff != "" {
		t.Errorf("config/crd differs from the framework's CRD (copy it again) (-framework +here):\n%s", diff)
	}
}

// TestContract runs bindkit's contract kit, unchanged, on the kind the
// Manager binds, on subjects as the kube-apiserver stores them.
func TestContract(t *testing.T) {
	env := controlPlane.Env(t)
	bindingtest.CheckContract(t, githubBinding("", "gh", tracker.Reference{}), bindingtest.ContractOptions{Env: env})
}
