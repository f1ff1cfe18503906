package hostile_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/webhook"
)

const (
	systemNamespace = "bindkit-system"
	// repoRoot is the repository's root, from this package's directory.
	repoRoot = "../.."
)

var githubBindings = schema.GroupVersionResource{Group: "bindings.bindkit.dev", Version: "v1alpha1", Resource: "githubbindings"}

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

// controllerBinary returns the githubbinding controller, built once into
// env's directory, or BINDKIT_HOSTILE_BINARY.
func controllerBinary(t *testing.T, env *testenv.Environment) string {
	t.Helper()
	if b := os.Getenv("BINDKIT_HOSTILE_BINARY"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		builtBinary = filepath.Join(env.Dir, "githubbinding-controller")
		buildErr = demo.BuildPackage(context.Background(), repoRoot, demo.ControllerPackage, builtBinary)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

// controller is the githubbinding controller running as a child process.
type controller struct {
	t    *testing.T
	cmd  *exec.Cmd
	port int // the webhook's, as the process reported it
	// probePort serves the probes over HTTP when the webhook requires
	// client certificates; 0 otherwise.
	probePort int
	// metrics is where /metrics is served (host:port), as reported, over
	// HTTPS to metricsToken (the control plane admin's, which may get
	// /metrics).
	metrics, metricsToken string
	logPath               string
	done                  chan error
	roots                 *x509.CertPool // trusts the webhook's serving certificate
}

func (c *controller) pid() int { return c.cmd.Process.Pid }
func (c *controller) url() string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", c.port, githubbinding.WebhookPath)
}

// startController runs the controller as the demo does, with default
// flags but those that put its webhook on loopback and its listeners on
// ports the kernel picks, points the webhook configuration at the port it
// reported, and waits until it is ready. ready checks readiness; nil means /readyz on the webhook's port.
func startController(t *testing.T, env *testenv.Environment, ready func(*controller) error, extraArgs ...string) *controller {
	t.Helper()
	binary := controllerBinary(t, env)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range []string{systemNamespace, testNamespace} {
		_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	c := &controller{t: t, logPath: filepath.Join(t.TempDir(), "controller.log"), done: make(chan error, 1), metricsToken: env.Config.BearerToken}
	logFile, err := os.Create(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	listenFile := filepath.Join(t.TempDir(), "listen-addresses.json")
	args := append([]string{
		"--kubeconfig=" + env.KubeconfigPath,
		"--disable-ha",
		"--webhook-address=127.0.0.1",
		// Every listener on a port the kernel picks, reported in a file.
		"--webhook-port=0",
		"--probe-port=0",
		"--metrics-address=127.0.0.1:0",
		"--listen-addresses-file=" + listenFile,
		"--webhook-ip-sans=127.0.0.1",
		// Not a bound: only so that stopping takes no 15 s.
		"--webhook-grace-period=-1s",
	}, extraArgs...)
	c.cmd = exec.Command(binary, args...)
	c.cmd.Env = append(os.Environ(), "SYSTEM_NAMESPACE="+systemNamespace)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		c.done <- c.cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(c.stop)

	var addrs sharedmain.ListenAddresses
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		if err := c.exited(); err != nil {
			return false, err
		}
		addrs, err = sharedmain.ReadListenAddresses(listenFile)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("controller did not report its addresses: %v\n%s", err, c.logTail())
	}
	c.port, c.probePort, c.metrics = addrs.WebhookPort(), addrs.ProbePort(), addrs.Metrics
	installWebhookConfiguration(t, kube, c.port)

	if ready == nil {
		ready = (*controller).readyOverTLS
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		if err := c.exited(); err != nil {
			return false, err
		}
		return ready(c) == nil, nil
	}); err != nil {
		t.Fatalf("controller not ready: %v (last check: %v)\n%s", err, ready(c), c.logTail())
	}
	if c.roots == nil {
		c.roots = servingCAs(t, kube)
	}
	return c
}

// installWebhookConfiguration points the MutatingWebhookConfiguration the
// controller programs at port, creating it if need be. The controller adds
// rules, selectors and the CA bundle.
func installWebhookConfiguration(t *testing.T, kube kubernetes.Interface, port int) {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, githubbinding.WebhookPath)
	configs := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	existing, err := configs.Get(t.Context(), githubbinding.WebhookConfigurationName, metav1.GetOptions{})
	if err == nil {
		existing.Webhooks[0].ClientConfig.URL = &url
		if _, err := configs.Update(t.Context(), existing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	_, err = configs.Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: githubbinding.WebhookConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    githubbinding.WebhookConfigurationName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		configs.Delete(context.Background(), githubbinding.WebhookConfigurationName, metav1.DeleteOptions{})
	})
}

// servingCAs reads the CA the controller's certificates Secret holds.
func servingCAs(t *testing.T, kube kubernetes.Interface) *x509.CertPool {
	t.Helper()
	secret, err := kube.CoreV1().Secrets(systemNamespace).Get(t.Context(), webhook.DefaultSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data[certificates.DefaultDataKeys().CACert]) {
		t.Fatal("certificates Secret holds no CA")
	}
	return pool
}

func (c *controller) readyOverTLS() error {
	if c.roots == nil {
		kube := kubernetes.NewForConfigOrDie(controlPlane.Env(c.t).Config)
		secret, err := kube.CoreV1().Secrets(systemNamespace).Get(c.t.Context(), webhook.DefaultSecretName, metav1.GetOptions{})
		if err != nil || len(secret.Data[certificates.DefaultDataKeys().CACert]) == 0 {
			return errors.New("certificates Secret not written yet")
		}
		c.roots = x509.NewCertPool()
		c.roots.AppendCertsFromPEM(secret.Data[certificates.DefaultDataKeys().CACert])
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.roots}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", c.port, webhook.ReadyzPath))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// exited returns the process's end, if it has ended.
func (c *controller) exited() error {
	select {
	case err := <-c.done:
		c.done <- err
		return fmt.Errorf("controller exited: %v\n%s", err, c.logTail())
	default:
		return nil
	}
}

// stop ends the process with SIGTERM, then SIGKILL after a while.
func (c *controller) stop() {
	if c.exited() != nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		c.t.Errorf("controller did not exit within 20s of SIGTERM\n%s", c.logTail())
	}
}

func (c *controller) logTail() string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-30):], []byte("\n")))
}

// checkLog fails t if the controller's log records a panic.
func (c *controller) checkLog() {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, bad := range []string{"panic", "fatal error"} {
		if bytes.Contains(data, []byte(bad)) {
			c.t.Errorf("controller log records a %s:\n%s", bad, c.logTail())
		}
	}
}

// memory reads the process's resident set (VmRSS) and its peak since the
// last resetPeak (VmHWM), in bytes.
func (c *controller) memory() (rss, peak int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.pid()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, value, _ := strings.Cut(s.Text(), ":")
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kib << 10
		case "VmHWM":
			peak = kib << 10
		}
	}
	return rss, peak
}

// resetPeak makes VmHWM the current VmRSS.
func (c *controller) resetPeak() {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", c.pid()), []byte("5"), 0); err != nil {
		c.t.Fatalf("reset the peak memory of the controller: %v", err)
	}
}

// createBinding creates a GithubBinding in testNamespace whose subject is
// the Deployment named subject.
func createBinding(t *testing.T, env *testenv.Environment, name, subject string) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": githubBindings.GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"namespace": testNamespace, "name": name},
		"spec": map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": subject},
			"secret":  map[string]any{"name": "github-token"},
		},
	}}
	_, err := dyn.Resource(githubBindings).Namespace(testNamespace).Create(t.Context(), b, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// drain reads and closes a response body, returning at most 4 KiB of it.
func drain(r io.ReadCloser) []byte {
	defer r.Close()
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	io.Copy(io.Discard, r)
	return b
}
