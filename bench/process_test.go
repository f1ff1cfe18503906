package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// The programs the process benchmarks build, each once per test binary,
// into binDir (removed by TestMain).
const (
	// controllerPackage is the example controller users run, built from the
	// repository root with the framework's own go.mod, as the demo builds it.
	controllerPackage = demo.ControllerPackage
	// profiledPackage is the same main with a CPU profile toggled by
	// SIGUSR1, built only when BINDKIT_BENCH_CPUPROFILE is set.
	profiledPackage = "./cmd/githubbinding-profiled"
	// typedInformerPackage is the reference process of the subject cache
	// benchmark: client-go's typed Deployment informer, nothing else.
	typedInformerPackage = "./cmd/typedinformer"
)

// cpuProfileEnv names a directory: when set, BenchmarkBind runs the profiled
// build of the controller and writes the controller's CPU profile of each
// timed part there.
const cpuProfileEnv = "BINDKIT_BENCH_CPUPROFILE"

var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
	builds     sync.Map // package -> *buildResult
)

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// removeBinaries removes what buildBinary built; TestMain calls it.
func removeBinaries() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// buildBinary builds pkg, once per test binary, and returns its path. A
// package starting with "./examples" is built from the repository root (the
// framework module), one under managerModule from that module, any other
// from bench/.
func buildBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	binDirOnce.Do(func() { binDir, binDirErr = os.MkdirTemp("", "bindkit-bench-bin-") })
	if binDirErr != nil {
		tb.Fatal(binDirErr)
	}
	v, _ := builds.LoadOrStore(pkg, &buildResult{})
	r := v.(*buildResult)
	r.once.Do(func() {
		// Named after the whole path: two examples' mains are both
		// cmd/controller.
		r.path = filepath.Join(binDir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-"))
		cmd := exec.Command("go", "build", "-o", r.path, pkg)
		switch {
		case strings.HasPrefix(pkg, "./examples/"):
			cmd.Dir = ".."
		case strings.HasPrefix(pkg, managerModule+"/"):
			// The controller-runtime example, a module of its own.
			cmd = exec.Command("go", "build", "-o", r.path, "."+strings.TrimPrefix(pkg, managerModule))
			cmd.Dir = managerModule
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if r.err != nil {
		tb.Fatal(r.err)
	}
	return r.path
}

// createSystemNamespace creates the namespace config/ installs the example
// controller in.
func createSystemNamespace(tb testing.TB, kube kubernetes.Interface) {
	tb.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create namespace %s: %v", demo.SystemNamespace, err)
	}
}

// installWebhook creates config/500-webhook-configuration.yaml as config/
// installs it for the example, with a URL client config to 127.0.0.1:port
// instead of the Service, as the demo does; when it is installed already
// (an earlier controller's), it points it at port
// (demo.InstallWebhookConfiguration). The controller's leader fills in
// rules, selectors and the CA.
func installWebhook(tb testing.TB, kube kubernetes.Interface, port int) {
	tb.Helper()
	mwc, err := demo.WebhookConfiguration("..", port)
	if err == nil {
		err = demo.InstallWebhookConfiguration(context.Background(), kube, mwc)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// waitWebhookIdle waits until the controller has taken every rule out of the
// webhook configuration (no Binding left), so that nothing calls a webhook
// that is about to stop.
func waitWebhookIdle(tb testing.TB, kube kubernetes.Interface) {
	tb.Helper()
	waitWebhookIdleNamed(tb, kube, githubbinding.WebhookConfigurationName)
}

// waitWebhookIdleNamed is waitWebhookIdle for the configuration name.
func waitWebhookIdleNamed(tb testing.TB, kube kubernetes.Interface, name string) {
	tb.Helper()
	poll(tb, time.Minute, "webhook configuration "+name+" without rules", func() (bool, error) {
		mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range mwc.Webhooks {
			if len(w.Rules) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// process is a program the benchmark started; it is stopped with SIGTERM.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan error
	stdin   io.WriteCloser
	stdout  *bufio.Reader // nil unless asked for
}

// startProcess runs binary with args and extra environment, its stderr (and
// stdout unless pipeStdout) in a log file under dir.
func startProcess(tb testing.TB, dir, binary string, args, env []string, pipeStdout bool) *process {
	tb.Helper()
	name := filepath.Base(binary)
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logFile
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	if pipeStdout {
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		p.stdout = bufio.NewReader(out)
	} else {
		cmd.Stdout = logFile
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	// The process dies with the benchmark, however the benchmark ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.done <- cmd.Wait()
		logFile.Close()
	}()
	return p
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and fails tb unless the process exits 0 within a
// minute (the webhook keeps serving for its grace period first).
func (p *process) stop(tb testing.TB) {
	tb.Helper()
	p.stdin.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		tb.Errorf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			tb.Errorf("%s did not exit cleanly after SIGTERM: %v\n%s", p.name, err, p.logTail())
		}
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		tb.Errorf("%s did not exit within a minute of SIGTERM; killed", p.name)
	}
}

// exited reports the process's exit, if it has exited.
func (p *process) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("%s exited: %v\n%s", p.name, err, p.logTail())
	default:
		return nil
	}
}

func (p *process) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-30):], []byte("\n")))
}

// memory is a process's resident set now (VmRSS) and at its peak (VmHWM),
// in bytes, from /proc/<pid>/status.
type memory struct{ rss, hwm uint64 }

func (p *process) memory(tb testing.TB) memory {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		tb.Fatalf("%s: read status: %v", p.name, err)
	}
	var m memory
	for line := range strings.SplitSeq(string(raw), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			tb.Fatalf("%s: status %s: %v", p.name, line, err)
		}
		if key == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.hwm = kb << 10
		}
	}
	return m
}

// cpu is the process's CPU time so far, user and system.
func (p *process) cpu() time.Duration { return pidsCPU([]int{p.pid()}) }

// startController runs the example controller (or the profiled build of
// it) with the flags a user needs to reach this control plane and nothing
// else: the kubeconfig, the system namespace, no leader election (one
// replica), where the webhook listens, and ports the kernel picks for its
// listeners (the default metrics port, :9090, fails the run when anything
// else on the machine holds it), which it reports in a file. Everything
// else, client QPS and burst included, is the default. It points the
// webhook configuration at the port the webhook reported (installWebhook)
// and returns once the webhook answers /readyz over TLS with the
// certificate the controller wrote.
func startController(tb testing.TB, env *testenv.Environment, binary string, extraEnv ...string) *process {
	tb.Helper()
	listenFile := filepath.Join(tb.TempDir(), "listen-addresses.json")
	p := startProcess(tb, env.Dir, binary, []string{
		"--kubeconfig=" + env.KubeconfigPath,
		"--disable-ha",
		"--webhook-address=127.0.0.1",
		"--webhook-port=0",
		"--webhook-ip-sans=127.0.0.1",
		"--metrics-address=127.0.0.1:0",
		"--probe-port=0",
		"--listen-addresses-file=" + listenFile,
	}, append([]string{"SYSTEM_NAMESPACE=" + demo.SystemNamespace}, extraEnv...), false)
	port := p.webhookPort(tb, listenFile)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	installWebhook(tb, kube, port)
	if err := demo.WaitReady(context.Background(), kube, port, 2*time.Minute); err != nil {
		p.stop(tb)
		tb.Fatalf("%v\n%s", err, p.logTail())
	}
	return p
}

// webhookPort waits, at most a minute, for the port the process reports
// its webhook bound in listenFile (--listen-addresses-file).
func (p *process) webhookPort(tb testing.TB, listenFile string) int {
	tb.Helper()
	var addrs sharedmain.ListenAddresses
	poll(tb, time.Minute, p.name+"'s listen addresses", func() (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		var err error
		addrs, err = sharedmain.ReadListenAddresses(listenFile)
		return err == nil, nil
	})
	return addrs.WebhookPort()
}

// poll runs cond every 100ms until it reports true, fails tb on its error or
// after timeout. It is for set-up and tear-down, never for what is timed.
func poll(tb testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			tb.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
