package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/webhook"
)

// WebhookConfigPath is the webhook configuration config/ installs,
// relative to the repository root.
const WebhookConfigPath = "config/500-webhook-configuration.yaml"

// BuildController builds the githubbinding controller (ControllerPackage)
// from the repository at repoRoot into binary.
func BuildController(ctx context.Context, repoRoot, binary string) error {
	return BuildPackage(ctx, repoRoot, ControllerPackage, binary)
}

// BuildPackage builds the main package pkg (an import path, or a path
// relative to repoRoot such as ./examples/sinkbinding/cmd/controller) of
// the repository at repoRoot into binary.
func BuildPackage(ctx context.Context, repoRoot, pkg, binary string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", binary, pkg)
	cmd.Dir = repoRoot
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, output)
	}
	return nil
}

// WebhookConfiguration returns the MutatingWebhookConfiguration of
// WebhookConfigPath as config/ installs it, except that each webhook is
// reached through a URL on 127.0.0.1:port (with the Service's path)
// instead of the Service, which a control plane without nodes cannot
// route.
func WebhookConfiguration(repoRoot string, port int) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return WebhookConfigurationAt(filepath.Join(repoRoot, WebhookConfigPath), port)
}

// WebhookConfigurationAt is WebhookConfiguration for the configuration in
// the file at path.
func WebhookConfigurationAt(path string, port int) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		if cc.Service == nil {
			return nil, fmt.Errorf("%s: webhook %s has no service client config", path, cfg.Webhooks[i].Name)
		}
		url := fmt.Sprintf("https://127.0.0.1:%d", port)
		if cc.Service.Path != nil {
			url += *cc.Service.Path
		}
		cc.Service, cc.URL = nil, &url
	}
	return cfg, nil
}

// Controller is a githubbinding controller process started by
// StartController.
type Controller struct {
	cmd     *exec.Cmd
	logPath string
	// MetricsAddress is where it serves its metrics (127.0.0.1 and a free
	// port), unless args gave --metrics-address.
	MetricsAddress string
	// ProbePort is where it serves /healthz and /readyz over HTTP when it
	// runs no webhook.
	ProbePort int
	done      chan struct{}
	mu        sync.Mutex
	err       error // cmd.Wait's result, once done is closed
}

// StartController starts binary as users run it, against env, in
// SystemNamespace: its kubeconfig, the webhook on 127.0.0.1:port with
// 127.0.0.1 in its certificate, its metrics on 127.0.0.1 and a free port
// (Controller.MetricsAddress; processes run side by side), its probes on
// another free port (ProbePort), and args after
// those. Its log goes to a file in env.Dir (LogTail).
func StartController(env *testenv.Environment, binary string, port int, args ...string) (*Controller, error) {
	metricsPort, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	// Probes are served on a port of their own when no webhook runs (a
	// process admitting only by policy), so it too must be free.
	probePort, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp(env.Dir, filepath.Base(binary)+"-*.log")
	if err != nil {
		return nil, err
	}
	metricsAddress := "127.0.0.1:" + strconv.Itoa(metricsPort)
	cmd := exec.Command(binary, append([]string{
		"--kubeconfig=" + env.KubeconfigPath,
		"--webhook-address=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(port),
		"--webhook-ip-sans=127.0.0.1",
		"--metrics-address=" + metricsAddress,
		"--probe-port=" + strconv.Itoa(probePort),
	}, args...)...)
	cmd.Env = append(os.Environ(), "SYSTEM_NAMESPACE="+SystemNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start controller: %w", err)
	}
	c := &Controller{cmd: cmd, logPath: logFile.Name(), MetricsAddress: metricsAddress, ProbePort: probePort, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

// Exited reports whether the process has exited, and how.
func (c *Controller) Exited() (bool, error) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, c.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM and expects a clean exit within the drain period; it
// kills the process after 60 seconds. Calling it on an exited process
// returns how it exited.
func (c *Controller) Stop() error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("controller: SIGTERM: %w", err)
	}
	select {
	case <-c.done:
		if _, err := c.Exited(); err != nil {
			return fmt.Errorf("controller did not exit cleanly after SIGTERM: %w", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		c.Kill()
		return errors.New("controller did not exit within 60s of SIGTERM; killed")
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (c *Controller) Kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// Log returns the process's log so far.
func (c *Controller) Log() string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// LogTail returns the last n lines of the process's log.
func (c *Controller) LogTail(n int) string {
	lines := bytes.Split(bytes.TrimRight([]byte(c.Log()), "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}

// WaitReady waits, at most timeout, for the certificates Secret and for
// the webhook's /readyz on 127.0.0.1:port to answer 200 over TLS, trusting
// the Secret's CA bundle.
func WaitReady(ctx context.Context, kube kubernetes.Interface, port int, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = webhook.ProbeReady(ctx, kube, SystemNamespace, webhook.DefaultSecretName, port)
		return last == "", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the controller to be ready: %w (last: %s)", err, last)
	}
	return nil
}
