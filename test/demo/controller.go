package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/scrape"
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

// SharedBuildsEnv names the environment variable that lets the test
// processes of one run share their builds: set to a directory, BuildPackage
// builds each package once into it (whichever process asks first; the
// others wait for that build) and links or copies that binary where it is
// asked for. `make test` sets it to a directory of its own for the run
// (hack/test-lanes.sh) and removes it after: about thirty test processes
// run the example controllers, and each link costs seconds of CPU. The
// directory must not outlive the sources it was built from; unset, every
// call builds.
const SharedBuildsEnv = "BINDKIT_TEST_BUILDS"

// BuildPackage builds the main package pkg (an import path, or a path
// relative to repoRoot such as ./examples/sinkbinding/cmd/controller) of
// the repository at repoRoot into binary; see SharedBuildsEnv for how
// processes share a build.
func BuildPackage(ctx context.Context, repoRoot, pkg, binary string) error {
	dir := os.Getenv(SharedBuildsEnv)
	if dir == "" {
		return goBuild(ctx, repoRoot, pkg, binary)
	}
	shared, err := sharedBuild(ctx, dir, repoRoot, pkg)
	if errors.Is(err, errors.ErrUnsupported) {
		return goBuild(ctx, repoRoot, pkg, binary)
	}
	if err != nil {
		return err
	}
	if err := os.Link(shared, binary); err == nil {
		return nil
	}
	return copyExecutable(shared, binary)
}

// goBuild runs go build for pkg in repoRoot.
func goBuild(ctx context.Context, repoRoot, pkg, binary string) error {
	// Without DWARF (-w), which only a debugger reads: a quarter less
	// CPU for each link.
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-w", "-o", binary, pkg)
	cmd.Dir = repoRoot
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, output)
	}
	return nil
}

// sharedBuild returns pkg's binary in dir, building it first if no process
// has. The package's absolute directory (or its import path) names it, so
// two copies of the repository never share a binary; an exclusive lock on
// a file beside it makes the other processes wait for the one that builds.
func sharedBuild(ctx context.Context, dir, repoRoot, pkg string) (string, error) {
	key := pkg
	if strings.HasPrefix(pkg, ".") {
		abs, err := filepath.Abs(filepath.Join(repoRoot, pkg))
		if err != nil {
			return "", err
		}
		key = abs
	}
	sum := sha256.Sum256([]byte(key))
	binary := filepath.Join(dir, filepath.Base(key)+"-"+hex.EncodeToString(sum[:8]))
	lock, err := os.OpenFile(binary+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("%s (%s): %w", SharedBuildsEnv, dir, err)
	}
	defer lock.Close() // closing releases the lock
	if err := lockExclusive(lock); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	// Built under another name and renamed, so a binary in dir is always
	// whole, even after a process died mid-build.
	if err := goBuild(ctx, repoRoot, pkg, binary+".partial"); err != nil {
		return "", err
	}
	return binary, os.Rename(binary+".partial", binary)
}

// copyExecutable copies the executable at from to to.
func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return out.Close()
}

// built are the binaries BuiltFor built, by control plane directory and
// package.
var built struct {
	sync.Mutex
	binary map[[2]string]string
}

// BuiltFor returns the main package pkg of the repository at repoRoot (as
// BuildPackage takes them) built into env.Dir/name, which the control plane's
// Stop removes; it builds on the first call for env and pkg in this
// process, and returns that binary after. A link costs seconds of CPU, so
// the tests of one package share one build of each binary they run.
func BuiltFor(env *testenv.Environment, repoRoot, pkg, name string) (string, error) {
	built.Lock()
	defer built.Unlock()
	key := [2]string{env.Dir, pkg}
	if b, ok := built.binary[key]; ok {
		return b, nil
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", err
	}
	binary := filepath.Join(env.Dir, name)
	if err := BuildPackage(context.Background(), root, pkg, binary); err != nil {
		return "", err
	}
	if built.binary == nil {
		built.binary = map[[2]string]string{}
	}
	built.binary[key] = binary
	return binary, nil
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

// PointWebhookConfiguration points the webhooks of the installed
// MutatingWebhookConfiguration name whose URL reaches 127.0.0.1:from at
// 127.0.0.1:to, keeping their paths: a controller binds a port the kernel
// picks, so a restarted one is reached on another, as a Service follows a
// restarted pod. Webhooks pointed elsewhere, and a configuration not
// installed, are left alone.
func PointWebhookConfiguration(ctx context.Context, kube kubernetes.Interface, name string, from, to int) error {
	if from == to {
		return nil
	}
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	fromHost, toHost := net.JoinHostPort("127.0.0.1", strconv.Itoa(from)), net.JoinHostPort("127.0.0.1", strconv.Itoa(to))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed := false
		for i := range cfg.Webhooks {
			cc := &cfg.Webhooks[i].ClientConfig
			if cc.URL == nil {
				continue
			}
			u, err := url.Parse(*cc.URL)
			if err != nil || u.Host != fromHost {
				continue
			}
			u.Host = toHost
			s := u.String()
			cc.URL, changed = &s, true
		}
		if !changed {
			return nil
		}
		_, err = api.Update(ctx, cfg, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("point MutatingWebhookConfiguration %s at %s: %w", name, toHost, err)
	}
	return nil
}

// InstallWebhookConfiguration creates cfg (WebhookConfigurationAt's, its
// URLs on the port a started controller reported); when it is installed
// already, for an earlier process, it points the installed webhooks that
// have a URL at cfg's URL of the same webhook and leaves the rest (the
// rules, selectors and CA the controller fills in) as they are. So a test
// installs the configuration once its controller has bound a port the
// kernel picked, and again for each process it restarts.
func InstallWebhookConfiguration(ctx context.Context, kube kubernetes.Interface, cfg *admissionregistrationv1.MutatingWebhookConfiguration) error {
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err := api.Create(ctx, cfg, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", cfg.Name, err)
		}
		return nil
	}
	urls := map[string]*string{}
	for _, w := range cfg.Webhooks {
		urls[w.Name] = w.ClientConfig.URL
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		installed, err := api.Get(ctx, cfg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range installed.Webhooks {
			w := &installed.Webhooks[i]
			if u := urls[w.Name]; u != nil && w.ClientConfig.URL != nil {
				w.ClientConfig.URL = u
			}
		}
		_, err = api.Update(ctx, installed, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("point MutatingWebhookConfiguration %s at the new process: %w", cfg.Name, err)
	}
	return nil
}

// Controller is a githubbinding controller process started by
// StartController.
type Controller struct {
	cmd     *exec.Cmd
	logPath string
	// Addresses are where it listens, as it reported them
	// (--listen-addresses-file): every listener on a port the kernel
	// picked, unless args gave another. Empty for a process that exited
	// without listening (--uninstall).
	Addresses sharedmain.ListenAddresses
	// WebhookPort is the port of its webhook on 127.0.0.1; 0 when it runs
	// no webhook.
	WebhookPort int
	// MetricsAddress is where it serves its metrics (127.0.0.1 and a port
	// the kernel picked), unless args gave --metrics-address: over HTTPS
	// to callers allowed to get /metrics (Metrics), unless args gave
	// --metrics-secure=false.
	MetricsAddress string
	// metricsToken is the bearer token Metrics scrapes with: the control
	// plane's admin's.
	metricsToken string
	// ProbePort is where it serves /healthz and /readyz over HTTP when it
	// runs no webhook (or one that requires client certificates); 0
	// otherwise.
	ProbePort int
	done      chan struct{}
	mu        sync.Mutex
	err       error // cmd.Wait's result, once done is closed
}

// listenTimeout bounds the wait for a started controller to bind its
// listeners, which it does before its caches sync.
const listenTimeout = time.Minute

// StartController starts binary as users run it, against env, in
// SystemNamespace: its kubeconfig, the webhook on 127.0.0.1 with
// 127.0.0.1 in its certificate, and its webhook, probes and metrics
// (HTTPS, as by default: Controller.Metrics scrapes them) on ports of
// 127.0.0.1 the kernel picks (processes run side by side, and a
// port chosen free before the process binds it can be taken by then),
// then args. It returns once the process has reported where it listens
// (Controller.Addresses, WebhookPort, ProbePort, MetricsAddress), or has
// exited 0 without listening, as --uninstall does; a process that exits
// otherwise, or does not listen within a minute, is an error quoting its
// log. Its log goes to a file in env.Dir (LogTail).
func StartController(env *testenv.Environment, binary string, args ...string) (*Controller, error) {
	logFile, err := os.CreateTemp(env.Dir, filepath.Base(binary)+"-*.log")
	if err != nil {
		return nil, err
	}
	addressesFile := strings.TrimSuffix(logFile.Name(), ".log") + "-listen.json"
	cmd := exec.Command(binary, append([]string{
		"--kubeconfig=" + env.KubeconfigPath,
		"--webhook-address=127.0.0.1",
		"--webhook-port=0",
		"--webhook-ip-sans=127.0.0.1",
		"--metrics-address=127.0.0.1:0",
		"--probe-port=0",
		"--listen-addresses-file=" + addressesFile,
	}, args...)...)
	cmd.Env = append(os.Environ(), "SYSTEM_NAMESPACE="+SystemNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start controller: %w", err)
	}
	c := &Controller{cmd: cmd, logPath: logFile.Name(), done: make(chan struct{}), metricsToken: env.Config.BearerToken}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	if err := c.waitListening(addressesFile); err != nil {
		c.Kill()
		return nil, fmt.Errorf("%w\nlast lines of the controller's log:\n%s", err, c.LogTail(30))
	}
	return c, nil
}

// waitListening waits until the process has written addressesFile, or has
// exited, at most listenTimeout, and sets the addresses it reported.
func (c *Controller) waitListening(addressesFile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), listenTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	addrs, err := sharedmain.WaitListenAddresses(ctx, addressesFile)
	if err != nil {
		if exited, exitErr := c.Exited(); exited {
			if exitErr != nil {
				return fmt.Errorf("controller exited before it listened: %w", exitErr)
			}
			return nil // it had nothing to serve (--uninstall)
		}
		return fmt.Errorf("controller: %w", err)
	}
	c.Addresses, c.WebhookPort, c.ProbePort, c.MetricsAddress = addrs, addrs.WebhookPort(), addrs.ProbePort(), addrs.Metrics
	return nil
}

// Metrics scrapes the controller's metrics as Prometheus does a bindkit
// process with its default metrics settings: over HTTPS, with a bearer
// token the kube-apiserver authorizes to get /metrics (the control
// plane's admin's).
func (c *Controller) Metrics(ctx context.Context) (scrape.Families, error) {
	return scrape.GetWithToken(ctx, "https://"+c.MetricsAddress+sharedmain.MetricsPath, c.metricsToken)
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
