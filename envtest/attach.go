package envtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// ControlPlaneEnv names the environment variable that points Shared at a
// control plane already running: a description file Environment.Describe
// wrote. With it set, Shared.Env attaches to that control plane (Attach)
// instead of starting one for the test binary, so a package's integration
// tests skip the seconds of start-up, and a contributor runs one package
// again and again against one control plane. Unset, the default, each
// test binary starts its own.
const ControlPlaneEnv = "BINDKIT_CONTROL_PLANE"

// description is what Describe writes and Attach reads: how to reach a
// running control plane and what it runs.
type description struct {
	Host                string       `json:"host"`
	BearerToken         string       `json:"bearerToken"`
	CAPEM               []byte       `json:"caPEM"`
	KubeconfigPath      string       `json:"kubeconfig"`
	WebhookClientCAFile string       `json:"webhookClientCAFile,omitempty"`
	AuditLog            string       `json:"auditLog,omitempty"`
	Version             version.Info `json:"version"`
	KubeMinor           string       `json:"kubeMinor"`
	ControllerManager   bool         `json:"controllerManager"`
	Controllers         []string     `json:"controllers,omitempty"`
	Workloads           bool         `json:"workloads"`
	Nodes               int          `json:"nodes,omitempty"`
	WebhookClientAuth   bool         `json:"webhookClientAuth"`
	PIDs                []int        `json:"pids"`
}

// Describe writes to path what Attach needs to reach the control plane and
// to check that it runs what a test asks for. The file holds the admin
// token: it is written readable by its owner only.
func (e *Environment) Describe(path string) error {
	if e.etcd == nil {
		return errors.New("envtest: Describe: the control plane is not this Environment's own")
	}
	d := description{
		Host: e.Config.Host, BearerToken: e.Config.BearerToken, CAPEM: e.Config.CAData,
		KubeconfigPath: e.KubeconfigPath, WebhookClientCAFile: e.WebhookClientCAFile, AuditLog: e.auditLog,
		Version: e.Version, KubeMinor: e.minor,
		ControllerManager: e.opts.ControllerManager, Controllers: e.opts.Controllers,
		Workloads: e.opts.Workloads, Nodes: e.opts.Nodes, WebhookClientAuth: e.opts.WebhookClientAuth,
		PIDs: e.PIDs(),
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("envtest: describe the control plane: %w", err)
	}
	return nil
}

// attachTimeout bounds Attach's health check and CRD installation.
const attachTimeout = 30 * time.Second

// Attach returns an Environment for the running control plane that the
// file at path describes (Environment.Describe), after checking that it
// answers and runs what opts ask for (its minor, kube-controller-manager
// and its controllers, workloads, the audit log, webhook client
// authentication; a control plane that runs more serves too), and
// installs opts.CRDPaths. The Environment has a temporary Dir of its own;
// its Stop removes that and leaves the control plane running. What the
// tests create stays on the control plane unless they delete it, as they
// do in a cluster.
func Attach(ctx context.Context, path string, opts Options) (*Environment, error) {
	opts, minor, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envtest: attach (%s): %w", ControlPlaneEnv, err)
	}
	var d description
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("envtest: attach: %s: %w", path, err)
	}
	if missing := d.lacks(opts, minor); len(missing) > 0 {
		return nil, fmt.Errorf("envtest: the control plane %s describes (%s) does not run %s, which these tests ask for: start one that does, or unset %s",
			path, ControlPlaneEnv, strings.Join(missing, ", "), ControlPlaneEnv)
	}
	dir, err := os.MkdirTemp("", "bindkit-envtest-attached-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	env := &Environment{
		Config:              &rest.Config{Host: d.Host, BearerToken: d.BearerToken, TLSClientConfig: rest.TLSClientConfig{CAData: d.CAPEM}, QPS: -1, WrapTransport: retryingCRDDelay},
		KubeconfigPath:      d.KubeconfigPath,
		Dir:                 dir,
		WebhookClientCAFile: d.WebhookClientCAFile,
		Version:             d.Version,
		opts:                opts,
		minor:               d.KubeMinor,
		auditLog:            d.AuditLog,
		pids:                d.PIDs,
	}
	if err := env.attach(ctx, opts.CRDPaths); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("envtest: attach to the control plane %s describes: %w", path, err)
	}
	return env, nil
}

// attach reads the webhook client CA, checks that the kube-apiserver
// answers /readyz and installs crdPaths.
func (e *Environment) attach(ctx context.Context, crdPaths []string) error {
	if e.WebhookClientCAFile != "" {
		pem, err := os.ReadFile(e.WebhookClientCAFile)
		if err != nil {
			return err
		}
		e.WebhookClientCAPEM = pem
	}
	ctx, cancel := context.WithTimeout(ctx, attachTimeout)
	defer cancel()
	client, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Config.Host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		}
	}
	if err != nil {
		return fmt.Errorf("kube-apiserver at %s: /readyz: %w (is the control plane still running?)", e.Config.Host, err)
	}
	return e.InstallCRDs(ctx, crdPaths...)
}

// lacks names what opts (with their defaults, of minor) need that the
// described control plane does not run.
func (d description) lacks(opts Options, minor string) []string {
	var missing []string
	if d.KubeMinor != minor {
		missing = append(missing, "Kubernetes "+minor+" (it runs "+d.KubeMinor+")")
	}
	for _, need := range []struct {
		what      string
		need, has bool
	}{
		{"kube-controller-manager (Options.ControllerManager)", opts.ControllerManager, d.ControllerManager},
		{"workloads (Options.Workloads)", opts.Workloads, d.Workloads},
		{"an audit log (Options.Audit)", opts.Audit, d.AuditLog != ""},
		{"webhook client authentication (Options.WebhookClientAuth)", opts.WebhookClientAuth, d.WebhookClientAuth},
	} {
		if need.need && !need.has {
			missing = append(missing, need.what)
		}
	}
	for _, c := range opts.Controllers {
		if d.ControllerManager && !slices.Contains(d.Controllers, c) {
			missing = append(missing, "the controller "+c)
		}
	}
	if opts.Workloads && d.Workloads && opts.Nodes != d.Nodes {
		missing = append(missing, fmt.Sprintf("%d nodes (it runs %d)", opts.Nodes, d.Nodes))
	}
	return missing
}

// DescriptionPath is where a control plane of minor is described by
// default: a file in the system's temporary directory.
func DescriptionPath(minor string) string {
	return filepath.Join(os.TempDir(), "bindkit-controlplane-"+minor+".json")
}
