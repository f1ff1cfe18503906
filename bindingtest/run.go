package bindingtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

// RunOptions configure Run. Bindings is required.
type RunOptions struct {
	// Bindings are the Binding kinds the process runs, each as wiring.New
	// returned it: their controllers and webhooks are its constructors.
	Bindings []*wiring.Kind
	// WebhookConfigurations are YAML files that hold the Bindings'
	// MutatingWebhookConfigurations as the deployment installs them
	// (config/500-webhook-configuration.yaml), documents of other kinds
	// ignored. Each is installed with its webhooks' client config pointed at
	// the process's webhook on 127.0.0.1. A Binding whose configuration no
	// file holds gets one made up: its webhook, failurePolicy Fail, no
	// rules, as config/ installs it.
	WebhookConfigurations []string
	// Component names the process: its logs and its leader-election Lease.
	// Default: "bindingtest".
	Component string
	// SystemNamespace is where the process runs: its certificates Secret
	// and its Lease. Default: a namespace made for the test.
	SystemNamespace string
	// Flags are the process's command-line settings. Run sets what reaches
	// the control plane (Kubeconfig, the webhook's address and IP SANs),
	// binds the webhook and probes to ports the kernel picks
	// (sharedmain.AnyPort, ListenAddressesFile) and, when they are zero,
	// shortens WebhookGracePeriod to a second and serves metrics on a port
	// of 127.0.0.1 the kernel picks; everything else is sharedmain's
	// default, leader election included, as a binary started without flags
	// runs.
	Flags sharedmain.Flags
	// StartTimeout bounds the wait for the webhook to serve. Default: 60
	// seconds.
	StartTimeout time.Duration
}

// Process is a Binding kind's controller and webhook running in the test's
// process under sharedmain.Run, the code path of a binary's main, against
// a real kube-apiserver, which calls the webhook over TLS.
type Process struct {
	// Port is the webhook's port on 127.0.0.1, which the kernel picked;
	// 0 when the process runs no webhook (its kinds are all admitted by
	// policy).
	Port int
	// ProbePort serves /healthz and /readyz over HTTP on 127.0.0.1 when
	// the process runs no webhook; 0 otherwise (the webhook serves them).
	ProbePort int
	// SystemNamespace is the namespace the process runs in.
	SystemNamespace string

	t        testing.TB
	env      *envtest.Environment
	opts     RunOptions
	logs     *syncBuffer
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

// Run starts opts.Bindings' controllers and webhooks under sharedmain.Run
// against env and returns once the webhook serves with the certificate the
// process wrote (its CA is what the webhook configurations' caBundle gets).
// The process binds every listener to a port the kernel picks and reports
// it (sharedmain's ListenAddressesFile); once it has, Run installs each
// Binding's MutatingWebhookConfiguration (see
// RunOptions.WebhookConfigurations), pointed at
// https://127.0.0.1:<Port><path>. When the test ends it deletes
// every Binding of the kinds while the process still runs (so their
// finalizers go and their subjects are unbound), deletes the
// configurations, stops the process and fails the test if it does not
// stop cleanly; the process's log is printed when the test failed.
func Run(t testing.TB, env *envtest.Environment, opts RunOptions) *Process {
	t.Helper()
	if len(opts.Bindings) == 0 {
		t.Fatal("bindingtest.Run: RunOptions.Bindings is empty")
	}
	if opts.Component == "" {
		opts.Component = "bindingtest"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = env.CreateNamespace(t, "bindingtest-system-")
	}
	p := &Process{SystemNamespace: opts.SystemNamespace, t: t, env: env, opts: opts, logs: &syncBuffer{}, done: make(chan error, 1)}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	t.Cleanup(p.cleanup)

	flags := opts.Flags
	flags.Kubeconfig = env.KubeconfigPath
	flags.WebhookAddress = "127.0.0.1"
	flags.WebhookIPSANs = []net.IP{net.ParseIP("127.0.0.1")}
	// Every listener on a port the kernel picks, reported in a file: a
	// port chosen free before the process binds it can be taken by then
	// (test processes run side by side; sharedmain's default metrics
	// port, :9090, would be taken by the first of them).
	flags.WebhookPort, flags.ProbePort = sharedmain.AnyPort, sharedmain.AnyPort
	flags.ListenAddressesFile = filepath.Join(t.TempDir(), "listen-addresses.json")
	if flags.MetricsAddress == "" {
		flags.MetricsAddress = "127.0.0.1:0"
	}
	if flags.WebhookGracePeriod == 0 {
		// Only shutdown waits for it; the default (a Service's endpoints
		// to update) would add its length to every test.
		flags.WebhookGracePeriod = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	ctx = sharedmain.WithFlags(ctx, flags)
	ctx = injection.WithSystemNamespace(ctx, opts.SystemNamespace)
	ctx = sharedmain.WithLogOutput(ctx, p.logs)
	var ctors []sharedmain.Constructor
	for _, b := range opts.Bindings {
		ctors = append(ctors, b.Controller, b.Webhook)
	}
	go func() { p.done <- sharedmain.Run(ctx, opts.Component, ctors...) }()

	if err := p.waitListening(flags.ListenAddressesFile); err != nil {
		t.Fatalf("bindingtest: %v\nprocess log:\n%s", err, p.Logs())
	}
	if err := p.installConfigurations(kube); err != nil {
		t.Fatal(err)
	}
	if err := p.waitServing(kube); err != nil {
		t.Fatalf("bindingtest: %v\nprocess log:\n%s", err, p.Logs())
	}
	return p
}

// Logs returns what the process has logged so far (JSON lines).
func (p *Process) Logs() string { return p.logs.String() }

// Stop stops the process as SIGTERM stops a binary and returns what
// sharedmain.Run returned; the test's cleanup calls it too. Bindings left
// with a finalizer stay so until a process runs again.
func (p *Process) Stop() error {
	var err error
	p.stopOnce.Do(func() {
		p.cancel()
		select {
		case err = <-p.done:
		case <-time.After(p.opts.StartTimeout):
			err = fmt.Errorf("sharedmain.Run did not return within %v of cancellation", p.opts.StartTimeout)
		}
	})
	return err
}

func (p *Process) cleanup() {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(p.env.Config)
	dyn := dynamic.NewForConfigOrDie(p.env.Config)
	// Bindings go while the controller runs, so it unbinds their subjects
	// and removes their finalizers, and the next test finds none.
	var left []string
	for _, b := range p.opts.Bindings {
		client := dyn.Resource(b.GVR)
		if list, err := client.List(ctx, metav1.ListOptions{}); err == nil {
			for _, item := range list.Items {
				_ = client.Namespace(item.GetNamespace()).Delete(ctx, item.GetName(), metav1.DeleteOptions{})
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			left = left[:0]
			for _, item := range list.Items {
				left = append(left, b.GVR.Resource+" "+item.GetNamespace()+"/"+item.GetName())
			}
			return len(list.Items) == 0, nil
		})
		if err != nil {
			p.t.Errorf("bindingtest: Bindings still there after the test: %v", left)
		}
	}
	// So do the admission policies of declarative kinds: a later test's
	// process decides afresh how to admit.
	for _, b := range p.opts.Bindings {
		if b.Declarative {
			if _, err := policy.RemoveMutatingPolicy(ctx, kube, policy.MutatingPolicyName(b.GVR.GroupResource())); err != nil {
				p.t.Errorf("bindingtest: %v", err)
			}
		}
	}
	// The configurations go before the process: with failurePolicy Fail a
	// stopped webhook would refuse later tests' creates.
	for _, b := range p.opts.Bindings {
		if err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, b.WebhookConfigurationName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			p.t.Errorf("bindingtest: delete MutatingWebhookConfiguration %s: %v", b.WebhookConfigurationName, err)
		}
	}
	if err := p.Stop(); err != nil {
		p.t.Errorf("bindingtest: %s: %v", p.opts.Component, err)
	}
	if p.t.Failed() {
		p.t.Logf("process log:\n%s", p.Logs())
	}
}

// installConfigurations creates each Binding's webhook configuration,
// from the files or made up, pointed at the process.
func (p *Process) installConfigurations(kube kubernetes.Interface) error {
	fromFiles := map[string]*admissionregistrationv1.MutatingWebhookConfiguration{}
	for _, path := range p.opts.WebhookConfigurations {
		configs, err := ReadWebhookConfigurations(path)
		if err != nil {
			return err
		}
		for _, c := range configs {
			fromFiles[c.Name] = c
		}
	}
	// A process that serves no webhook keeps its configurations out of
	// the path (its kinds are admitted by policy); they point at its
	// probes, where no admission is served.
	port := cmp.Or(p.Port, p.ProbePort)
	for _, b := range p.opts.Bindings {
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, b.WebhookPath)
		cfg, ok := fromFiles[b.WebhookConfigurationName]
		if !ok {
			if len(p.opts.WebhookConfigurations) > 0 {
				return fmt.Errorf("bindingtest: no MutatingWebhookConfiguration %s in %s", b.WebhookConfigurationName, strings.Join(p.opts.WebhookConfigurations, ", "))
			}
			cfg = &admissionregistrationv1.MutatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: b.WebhookConfigurationName},
				Webhooks: []admissionregistrationv1.MutatingWebhook{{
					Name:                    b.WebhookName,
					FailurePolicy:           new(admissionregistrationv1.Fail),
					SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
					AdmissionReviewVersions: []string{"v1"},
					TimeoutSeconds:          new(int32(10)),
				}},
			}
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
		}
		api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
		_, err := api.Create(context.Background(), cfg, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// An earlier process of the same test (CompareAdmissionPaths
			// runs two) installed it: point it at this one.
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current, err := api.Get(context.Background(), cfg.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for i := range current.Webhooks {
					current.Webhooks[i].ClientConfig.URL, current.Webhooks[i].ClientConfig.Service = &url, nil
				}
				_, err = api.Update(context.Background(), current, metav1.UpdateOptions{})
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("bindingtest: install MutatingWebhookConfiguration %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// ReadWebhookConfigurations reads the MutatingWebhookConfigurations of a
// YAML file, such as a kind's config/ holds (other documents are skipped),
// for a test to install them pointed at its own process.
func ReadWebhookConfigurations(path string) ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bindingtest: webhook configurations: %w", err)
	}
	var out []*admissionregistrationv1.MutatingWebhookConfiguration
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("bindingtest: %s: %w", path, err)
		}
		if raw["kind"] != "MutatingWebhookConfiguration" {
			continue
		}
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		js, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(js, cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("bindingtest: %s: MutatingWebhookConfiguration: %w", path, err)
		}
		out = append(out, cfg)
	}
}

// waitListening waits until the process has reported where it listens in
// path, or until it fails, and sets Port and ProbePort.
func (p *Process) waitListening(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.StartTimeout)
	defer cancel()
	go func() {
		select {
		case err := <-p.done:
			p.done <- err // for waitServing and Stop
			cancel()
		case <-ctx.Done():
		}
	}()
	addrs, err := sharedmain.WaitListenAddresses(ctx, path)
	if err != nil {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("the process stopped: %v", err)
		default:
		}
		return err
	}
	p.Port, p.ProbePort = addrs.WebhookPort(), addrs.ProbePort()
	return nil
}

// waitServing waits until the process has written its certificates and
// its webhook answers /readyz with a certificate that CA signed, as the
// kube-apiserver will verify it (for a process without a webhook, until
// its probes answer /readyz), or until the process fails.
func (p *Process) waitServing(kube kubernetes.Interface) error {
	var last string
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.StartTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-p.done:
			p.done <- err // for Stop
			return false, fmt.Errorf("the process stopped: %v", err)
		default:
		}
		if p.Port == 0 {
			if !probeReady(ctx, p.ProbePort) {
				last = "probes not ready"
				return false, nil
			}
			return true, nil
		}
		last = webhook.ProbeReady(ctx, kube, p.SystemNamespace, webhook.DefaultSecretName, p.Port)
		return last == "", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the process on 127.0.0.1:%d: %w (last: %s)", cmp.Or(p.Port, p.ProbePort), err, last)
	}
	return nil
}

// probeReady reports whether /readyz on 127.0.0.1:port answers 200.
func probeReady(ctx context.Context, port int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, webhook.ReadyzPath), nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// syncBuffer is a bytes.Buffer safe for the process's logger and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Sync() error { return nil }

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
