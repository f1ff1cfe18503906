package envtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrBinariesMissing reports that a control-plane binary (etcd,
// kube-apiserver, or kube-controller-manager when asked for) is not where
// Start looked for it.
var ErrBinariesMissing = errors.New("control-plane binaries missing")

// Options configure Start. The zero value is ready to use.
type Options struct {
	// BinDir holds the newest minor's etcd, kube-apiserver and
	// kube-controller-manager binaries, and every other minor's in a
	// subdirectory named after it (v1.36). Default: the BINDKIT_BIN_DIR
	// environment variable, else the minor's CacheDir, where
	// `bindkit controlplane` (BuildCommand) builds them.
	BinDir string
	// KubeMinor is the Kubernetes minor to run, such as "1.36"; Start fails
	// if the kube-apiserver it finds reports another. Default: the
	// BINDKIT_KUBE_MINOR environment variable, else NewestMinor.
	KubeMinor string
	// ControllerManager also runs kube-controller-manager, so that garbage
	// collection and namespace deletion happen as in a cluster. Without it a
	// deleted namespace stays Terminating and owner references are inert.
	ControllerManager bool
	// Controllers are the kube-controller-manager controllers to run when
	// ControllerManager is set. Default: DefaultControllers.
	Controllers []string
	// Workloads makes workloads run as in a cluster without containers: it
	// implies ControllerManager, adds WorkloadControllers to Controllers, and
	// also runs kube-scheduler and kwok (sigs.k8s.io/kwok) with Nodes fake
	// nodes, so that the pods of Deployments, StatefulSets, DaemonSets, Jobs
	// and CronJobs are scheduled and become Running and Ready (Jobs' pods
	// then succeed), and the workloads' status moves. A pod with
	// FailPodAnnotation, or a container of FailingImage, runs but never
	// becomes Ready (CrashLoopBackOff). kwok is looked for beside the
	// minor's binaries, then in BinDir itself: one build serves every minor.
	Workloads bool
	// Nodes is how many fake nodes Workloads creates (named kwok-node-0,
	// kwok-node-1, ...; each with KwokNodeAnnotation and room for any pod).
	// Default: 2.
	Nodes int
	// CRDPaths are YAML files of CustomResourceDefinitions to install, and
	// wait for, before Start returns.
	CRDPaths []string
	// Progress, if set, receives one line per start-up step.
	Progress io.Writer
	// StartTimeout bounds start-up, CRDs included. Default: 90 seconds.
	StartTimeout time.Duration
	// StopGrace is how long Stop waits for a process to exit after SIGTERM
	// before it kills it. Default: 15 seconds.
	StopGrace time.Duration
	// Audit makes the kube-apiserver log every request (Metadata level) for
	// Environment.AuditEvents, e.g. to see which permissions a client used.
	Audit bool
	// WebhookClientAuth makes the kube-apiserver present a client
	// certificate to every webhook it calls, through an
	// AdmissionConfiguration (WebhookAdmissionConfiguration kubeconfig), as
	// a cluster does for webhooks that authenticate their caller. The CA
	// that signed it is in Environment.WebhookClientCAFile.
	WebhookClientAuth bool

	// pickPorts, when set, replaces freePorts, for tests that hand Start
	// a port another process holds.
	pickPorts func(n int) ([]int, error)
}

// Environment is a running etcd and kube-apiserver, and kube-controller-manager
// if Options.ControllerManager asked for it.
type Environment struct {
	// Config reaches the kube-apiserver as an administrator (a member of
	// system:masters). Callers may copy it and change the copy. Its
	// clients retry, for up to 30 s, a write the kube-apiserver refuses
	// with 503 because a MutatingAdmissionPolicy matched a kind whose
	// CRD is seconds old ("There can be a delay between when
	// CustomResourceDefinitions are created and when they are
	// available"), as a user retries such a kubectl apply.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file with the same credentials, for
	// processes started by the caller.
	KubeconfigPath string
	// Dir is the temporary directory that holds every file of the
	// environment; Stop removes it.
	Dir string
	// WebhookClientCAFile and WebhookClientCAPEM are the CA of the client
	// certificate the kube-apiserver presents to webhooks, in a file and in
	// PEM form; empty unless Options.WebhookClientAuth.
	WebhookClientCAFile string
	WebhookClientCAPEM  []byte
	// Version is what the kube-apiserver reports at /version.
	Version version.Info

	etcd, apiserver, controllerManager, scheduler, kwok *process
	etcdURL                                             string // the client URL
	stopGrace                                           time.Duration

	// What the control plane runs (Options with their defaults) and where
	// the audit log is, for Describe and Attach.
	opts     Options
	minor    string
	auditLog string
	// pids are those of a control plane Attach found running, which this
	// Environment does not own.
	pids []int
}

const (
	defaultStartTimeout = 90 * time.Second
	defaultStopGrace    = 15 * time.Second
)

// Start launches etcd and kube-apiserver on free 127.0.0.1 ports and returns
// once the kube-apiserver reports ready and opts.CRDPaths are established.
// None of the control plane's processes can bind port 0 and report the
// port it got, so Start chooses free ports for them; when another process
// takes one between the choice and the bind, Start starts that process
// again on new ports (see onFreePorts), so a port taken under load never
// fails a start. A failed start cleans up after itself and returns an
// error that quotes the tail of the failing process's log.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	r, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	return start(ctx, r.binDir, r.kwokPath, r.minor, r.opts)
}

// CheckBinaries reports, without starting anything, whether Start would
// find the binaries opts needs: nil, or an error wrapping
// ErrBinariesMissing that says where it looked and how to build them (or
// another error for options Start refuses). A test whose set-up is slow
// calls it to skip before that set-up rather than after.
func CheckBinaries(opts Options) error {
	_, err := resolve(opts)
	return err
}

// resolved is what Start runs: opts with their defaults, the minor and
// where its binaries are.
type resolved struct {
	opts                    Options
	minor, binDir, kwokPath string
}

// resolve applies opts' defaults, and finds the binaries they need.
func resolve(opts Options) (resolved, error) {
	opts, minor, err := opts.withDefaults()
	if err != nil {
		return resolved{}, err
	}
	names := []string{etcdBinary, apiServerBinary}
	if opts.Workloads {
		names = append(names, schedulerBinary)
	}
	if opts.ControllerManager {
		names = append(names, controllerManagerBinary)
	}
	r := resolved{opts: opts, minor: minor}
	if r.binDir, err = resolveBinDir(opts.BinDir, minor, names); err != nil {
		return resolved{}, err
	}
	if opts.Workloads {
		if r.kwokPath, err = resolveKwok(r.binDir); err != nil {
			return resolved{}, err
		}
	}
	return r, nil
}

// withDefaults returns opts with their defaults, and the minor they ask
// for.
func (opts Options) withDefaults() (Options, string, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = defaultStopGrace
	}
	minor, err := resolveMinor(opts.KubeMinor)
	if err != nil {
		return opts, "", err
	}
	if opts.Nodes < 0 {
		return opts, "", errNoNodes
	}
	if opts.Workloads {
		opts.ControllerManager = true
		if opts.Nodes == 0 {
			opts.Nodes = defaultNodes
		}
	}
	if opts.ControllerManager {
		if len(opts.Controllers) == 0 {
			opts.Controllers = DefaultControllers()
		}
		if opts.Workloads {
			opts.Controllers = withWorkloadControllers(opts.Controllers)
		}
	}
	return opts, minor, nil
}

func start(ctx context.Context, binDir, kwokPath, minor string, opts Options) (_ *Environment, err error) {
	dir, err := os.MkdirTemp("", "bindkit-envtest-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	env := &Environment{Dir: dir, stopGrace: opts.StopGrace, opts: opts, minor: minor}
	defer func() {
		if err != nil {
			if stopErr := env.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()

	if err := opts.onFreePorts("etcd", 2, func(ports []int) error {
		progress(opts.Progress, "starting etcd on 127.0.0.1:%d", ports[0])
		return env.startEtcd(ctx, binDir, ports[0], ports[1])
	}); err != nil {
		return nil, err
	}

	files, err := writeAPIServerFiles(dir)
	if err != nil {
		return nil, err
	}
	if opts.WebhookClientAuth {
		if err := writeWebhookClientAuth(dir, files, env); err != nil {
			return nil, err
		}
	}
	var extra []string
	if opts.Audit {
		if extra, err = auditArgs(dir); err != nil {
			return nil, err
		}
		env.auditLog = auditLogPath(dir)
	}
	if err := opts.onFreePorts(apiServerBinary, 1, func(ports []int) error {
		progress(opts.Progress, "starting kube-apiserver on 127.0.0.1:%d", ports[0])
		return env.startAPIServer(ctx, binDir, files, ports[0], extra)
	}); err != nil {
		return nil, err
	}
	if err := env.checkVersion(minor); err != nil {
		return nil, err
	}
	if env.KubeconfigPath, err = writeKubeconfig(dir, env.Config); err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		if err := opts.onFreePorts(controllerManagerBinary, 1, func(ports []int) error {
			progress(opts.Progress, "starting kube-controller-manager on 127.0.0.1:%d (%s)", ports[0], strings.Join(opts.Controllers, ","))
			return env.startControllerManager(ctx, binDir, files, ports[0], opts.Controllers)
		}); err != nil {
			return nil, err
		}
	}
	if opts.Workloads {
		if err := opts.onFreePorts(schedulerBinary, 1, func(ports []int) error {
			progress(opts.Progress, "starting kube-scheduler on 127.0.0.1:%d", ports[0])
			return env.startScheduler(ctx, binDir, files, ports[0])
		}); err != nil {
			return nil, err
		}
		if err := opts.onFreePorts(kwokBinary, 1, func(ports []int) error {
			progress(opts.Progress, "starting kwok on 127.0.0.1:%d with %d fake nodes", ports[0], opts.Nodes)
			return env.startKwok(ctx, kwokPath, ports[0], opts.Nodes)
		}); err != nil {
			return nil, err
		}
	}
	if len(opts.CRDPaths) > 0 {
		progress(opts.Progress, "installing %d CRD file(s)", len(opts.CRDPaths))
		if err := env.InstallCRDs(ctx, opts.CRDPaths...); err != nil {
			return nil, err
		}
	}
	progress(opts.Progress, "control plane ready")
	return env, nil
}

// Stop ends kwok, kube-scheduler, kube-controller-manager, kube-apiserver,
// then etcd, and removes Dir. It is safe to call more than once.
func (e *Environment) Stop() error {
	var errs []error
	for _, p := range []*process{e.kwok, e.scheduler, e.controllerManager, e.apiserver, e.etcd} {
		if p != nil {
			errs = append(errs, p.stop(e.stopGrace))
		}
	}
	if err := os.RemoveAll(e.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", e.Dir, err))
	}
	return errors.Join(errs...)
}

// PIDs returns the process IDs of etcd, kube-apiserver and, those that
// run, kube-controller-manager, kube-scheduler and kwok, for callers that
// check nothing outlives Stop.
func (e *Environment) PIDs() []int {
	if e.etcd == nil {
		return e.pids // attached: another process's control plane
	}
	pids := []int{e.etcd.pid(), e.apiserver.pid()}
	for _, p := range []*process{e.controllerManager, e.scheduler, e.kwok} {
		if p != nil {
			pids = append(pids, p.pid())
		}
	}
	return pids
}

// startEtcd runs etcd on the client and peer ports and waits for its
// /health; a process that fails is stopped.
func (e *Environment) startEtcd(ctx context.Context, binDir string, clientPort, peerPort int) error {
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := startProcess(etcdBinary, filepath.Join(binDir, etcdBinary), []string{
		"--name=envtest",
		// A new store per attempt: one a failed start left is not reused.
		"--data-dir=" + filepath.Join(e.Dir, fmt.Sprintf("etcd-data-%d", clientPort)),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=envtest=" + peerURL,
		// A throw-away store: durability buys nothing and fsync costs seconds.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, e.Dir)
	if err != nil {
		return err
	}
	e.etcd, e.etcdURL = p, clientURL
	return e.stopIfFailed(p, waitHealthy(ctx, p, http.DefaultClient, clientURL+"/health"))
}

// apiServerFiles are the credentials written for kube-apiserver.
type apiServerFiles struct {
	serving               *ServingCert
	certFile, keyFile     string
	serviceAccountKeyFile string
	tokenFile             string
	adminToken            string
	extraArgs             []string // more kube-apiserver flags
}

func writeAPIServerFiles(dir string) (*apiServerFiles, error) {
	serving, err := NewServingCert("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	saKeyPEM, err := ecKeyPEM(saKey)
	if err != nil {
		return nil, err
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("generate admin token: %w", err)
	}
	f := &apiServerFiles{
		serving:               serving,
		certFile:              filepath.Join(dir, "apiserver.crt"),
		keyFile:               filepath.Join(dir, "apiserver.key"),
		serviceAccountKeyFile: filepath.Join(dir, "service-account.key"),
		tokenFile:             filepath.Join(dir, "tokens.csv"),
		adminToken:            hex.EncodeToString(token),
	}
	for path, data := range map[string][]byte{
		f.certFile:              serving.CertPEM,
		f.keyFile:               serving.KeyPEM,
		f.serviceAccountKeyFile: saKeyPEM,
		f.tokenFile:             []byte(f.adminToken + `,bindkit-admin,bindkit-admin,"system:masters"` + "\n"),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}

// startAPIServer runs kube-apiserver on port, against the environment's
// etcd, sets Config to reach it and waits for its /readyz; a process that
// fails is stopped.
func (e *Environment) startAPIServer(ctx context.Context, binDir string, f *apiServerFiles, port int, extra []string) error {
	p, err := startProcess(apiServerBinary, filepath.Join(binDir, apiServerBinary), append([]string{
		"--etcd-servers=" + e.etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// v1.37 refuses a loopback advertise address while it reconciles the
		// kubernetes Service endpoints; there is one server and no Service
		// consumers here, so there is nothing to reconcile.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + f.certFile,
		"--tls-private-key-file=" + f.keyFile,
		"--token-auth-file=" + f.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f.serviceAccountKeyFile,
		"--service-account-signing-key-file=" + f.serviceAccountKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Off even when kube-controller-manager runs: with it, a Pod created
		// in a namespace a moment old fails until the serviceaccount
		// controller has made "default", and tests create Pods at once.
		"--disable-admission-plugins=ServiceAccount",
		"--cert-dir=" + filepath.Join(e.Dir, "apiserver-certs"),
		"--v=0",
	}, append(f.extraArgs, extra...)...), e.Dir)
	if err != nil {
		return err
	}
	e.apiserver = p
	e.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     f.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: f.serving.CAPEM},
		QPS:             -1, // no client-side throttling: tests and benchmarks measure the server
		WrapTransport:   retryingCRDDelay,
	}
	httpClient, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return e.stopIfFailed(p, fmt.Errorf("build client for kube-apiserver: %w", err))
	}
	return e.stopIfFailed(p, waitHealthy(ctx, p, httpClient, e.Config.Host+"/readyz"))
}

// stopIfFailed stops p when err is not nil, so that a start retried on
// other ports leaves no process behind, and returns err.
func (e *Environment) stopIfFailed(p *process, err error) error {
	if err != nil {
		if stopErr := p.stop(e.stopGrace); stopErr != nil {
			return errors.Join(err, stopErr)
		}
	}
	return err
}

// healthRequestTimeout bounds one health request. A port another process
// took may accept a connection and never answer; the request also ends
// as soon as the process exits, so its exit is seen at once.
const healthRequestTimeout = 5 * time.Second

// waitHealthy polls url until it answers 200, the process exits, or ctx ends.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		if err := p.exitedError(); err != nil {
			return err
		}
		reqCtx, cancel := context.WithTimeout(ctx, healthRequestTimeout)
		go func() {
			select {
			case <-p.done:
				cancel()
			case <-reqCtx.Done():
			}
		}()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
		if err != nil {
			cancel()
			return fmt.Errorf("%s: health request: %w", p.name, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body)
		} else {
			last = err.Error()
		}
		cancel()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy at %s before %v (last answer: %s); last lines of %s:\n%s",
				p.name, url, context.Cause(ctx), last, p.logPath, p.logTail(logTailLines))
		case <-tick.C:
		}
	}
}

func writeKubeconfig(dir string, cfg *rest.Config) (string, error) {
	path := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
