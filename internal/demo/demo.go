package demo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
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
	"github.com/bindkit/bindkit/internal/testenv"
	"github.com/bindkit/bindkit/webhook"
)

// Names the demo uses; config/ uses the same for a cluster.
const (
	SystemNamespace   = "bindkit-system"
	DemoNamespace     = "demo"
	WebhookConfigName = "githubbindings.webhook.bindkit.dev"
	// CRDPath is the GithubBinding CRD, relative to the repository root.
	CRDPath = "config/300-githubbinding.yaml"
	// ControllerPackage is the example's main, built by Run.
	ControllerPackage = "./examples/githubbinding/cmd/controller"

	volumeName = "github-binding"
	mountPath  = "/var/bindings/github"
)

var githubBindings = schema.GroupVersionResource{Group: "bindings.bindkit.dev", Version: "v1alpha1", Resource: "githubbindings"}

// Options configure Run.
type Options struct {
	// RepoRoot is the bindkit repository, where the controller is built.
	RepoRoot string
	// Timeout bounds each wait. Default: 60 seconds.
	Timeout time.Duration
}

// Run plays the walkthrough against env, whose CRDs must include CRDPath,
// printing what happens to out. It returns the first step that failed.
func Run(ctx context.Context, out io.Writer, env *testenv.Environment, opts Options) (err error) {
	if opts.Timeout == 0 {
		opts.Timeout = 60 * time.Second
	}
	d := &demo{out: out, env: env, opts: opts,
		kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}

	binary := filepath.Join(env.Dir, "githubbinding-controller")
	d.step("building the githubbinding controller (%s)", ControllerPackage)
	if err := d.build(ctx, binary); err != nil {
		return err
	}
	port, err := testenv.FreePort()
	if err != nil {
		return err
	}
	if err := d.installWebhook(ctx, port); err != nil {
		return err
	}
	d.step("starting the controller and its webhook on 127.0.0.1:%d", port)
	ctrl, err := d.startController(binary, port)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := ctrl.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		} else if err == nil {
			d.step("controller stopped with SIGTERM and exited 0")
		}
		if err != nil {
			err = fmt.Errorf("%w\nlast lines of the controller's log:\n%s", err, ctrl.logTail())
		}
	}()
	if err := d.waitReady(ctx, port); err != nil {
		return err
	}
	return d.walkthrough(ctx)
}

type demo struct {
	out  io.Writer
	env  *testenv.Environment
	opts Options
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func (d *demo) step(format string, args ...any) { fmt.Fprintf(d.out, "==> "+format+"\n", args...) }

func (d *demo) build(ctx context.Context, binary string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", binary, ControllerPackage)
	cmd.Dir = d.opts.RepoRoot
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", ControllerPackage, err, output)
	}
	return nil
}

// installWebhook creates what config/ installs in a cluster, with a URL
// client config to 127.0.0.1 instead of a Service.
func (d *demo) installWebhook(ctx context.Context, port int) error {
	for _, ns := range []string{SystemNamespace, DemoNamespace} {
		_, err := d.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	_, err := d.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    WebhookConfigName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", WebhookConfigName, err)
	}
	return nil
}

// controllerProcess is the running controller.
type controllerProcess struct {
	cmd     *exec.Cmd
	logPath string
	done    chan error
}

func (d *demo) startController(binary string, port int) (*controllerProcess, error) {
	logPath := filepath.Join(d.env.Dir, "githubbinding-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary,
		"--kubeconfig="+d.env.KubeconfigPath,
		"--disable-ha",
		"--webhook-address=127.0.0.1",
		"--webhook-port="+strconv.Itoa(port),
		"--webhook-ip-sans=127.0.0.1",
	)
	cmd.Env = append(os.Environ(), "SYSTEM_NAMESPACE="+SystemNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start controller: %w", err)
	}
	p := &controllerProcess{cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		logFile.Close()
	}()
	return p, nil
}

// stop sends SIGTERM and expects a clean exit within the drain period.
func (p *controllerProcess) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("controller: SIGTERM: %w", err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("controller did not exit cleanly after SIGTERM: %w", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("controller did not exit within 60s of SIGTERM; killed")
	}
}

func (p *controllerProcess) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-30):], []byte("\n")))
}

// waitReady waits for the certificates Secret and for /readyz to answer
// 200 over TLS, trusting the CA the controller generated.
func (d *demo) waitReady(ctx context.Context, port int) error {
	keys := certificates.DefaultDataKeys()
	return d.poll(ctx, "controller ready", func(ctx context.Context) (string, error) {
		secret, err := d.kube.CoreV1().Secrets(SystemNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
		if err != nil || len(secret.Data[keys.CACert]) == 0 {
			return "certificates Secret not written yet", nil
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(secret.Data[keys.CACert])
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.ReadyzPath))
		if err != nil {
			return err.Error(), nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "readyz: " + resp.Status, nil
		}
		return "", nil
	})
}

func (d *demo) walkthrough(ctx context.Context) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: "github-token"},
		StringData: map[string]string{"token": "not-a-real-token"}}
	if _, err := d.kube.CoreV1().Secrets(DemoNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create secret: %w", err)
	}
	d.step("creating Deployment demo/hello")
	if _, err := d.kube.AppsV1().Deployments(DemoNamespace).Create(ctx, deployment("hello"), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment hello: %w", err)
	}
	d.step("creating GithubBinding demo/hello-github (subject: Deployment hello, secret: github-token)")
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": githubBindings.GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"namespace": DemoNamespace, "name": "hello-github"},
		"spec": map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "hello"},
			"secret":  map[string]any{"name": "github-token"},
		},
	}}
	if _, err := d.dyn.Resource(githubBindings).Namespace(DemoNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create GithubBinding: %w", err)
	}
	if err := d.waitBound(ctx, "hello", true); err != nil {
		return err
	}
	d.step("the reconciler bound Deployment hello; its pod template is now:")
	if err := d.printTemplate(ctx, "hello"); err != nil {
		return err
	}
	if err := d.waitBindingReady(ctx); err != nil {
		return err
	}

	d.step("creating GithubBinding demo/new-github and then Deployment demo/newcomer: bound at admission")
	binding2 := binding.DeepCopy()
	binding2.SetName("new-github")
	_ = unstructured.SetNestedField(binding2.Object, "newcomer", "spec", "subject", "name")
	if _, err := d.dyn.Resource(githubBindings).Namespace(DemoNamespace).Create(ctx, binding2, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create GithubBinding new-github: %w", err)
	}
	// The kube-apiserver calls the webhook once the controller has added
	// the rule; a dry-run create shows when that is.
	if err := d.poll(ctx, "webhook in force", func(ctx context.Context) (string, error) {
		got, err := d.kube.AppsV1().Deployments(DemoNamespace).Create(ctx, deployment("newcomer"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error(), nil
		}
		if !bound(&got.Spec.Template.Spec) {
			return "dry-run create not bound yet", nil
		}
		return "", nil
	}); err != nil {
		return err
	}
	created, err := d.kube.AppsV1().Deployments(DemoNamespace).Create(ctx, deployment("newcomer"), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create deployment newcomer: %w", err)
	}
	if !bound(&created.Spec.Template.Spec) {
		return errors.New("Deployment newcomer was created without the binding: admission did not bind it")
	}
	d.step("Deployment newcomer came back from its create already bound (volume %s)", volumeName)

	d.step("deleting GithubBinding demo/hello-github")
	if err := d.dyn.Resource(githubBindings).Namespace(DemoNamespace).Delete(ctx, "hello-github", metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete GithubBinding: %w", err)
	}
	if err := d.waitBound(ctx, "hello", false); err != nil {
		return err
	}
	if err := d.poll(ctx, "GithubBinding hello-github gone", func(ctx context.Context) (string, error) {
		_, err := d.dyn.Resource(githubBindings).Namespace(DemoNamespace).Get(ctx, "hello-github", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return fmt.Sprintf("still there (%v)", err), nil
	}); err != nil {
		return err
	}
	d.step("the Binding is gone and Deployment hello is unbound; its pod template is now:")
	return d.printTemplate(ctx, "hello")
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
					Containers:     []corev1.Container{{Name: "app", Image: "nginx"}},
				},
			},
		},
	}
}

// bound reports whether spec carries the binding's volume and a mount of it
// in every container and init container.
func bound(spec *corev1.PodSpec) bool {
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName }) {
		return false
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volumeName && m.MountPath == mountPath }) {
			return false
		}
	}
	return true
}

func (d *demo) waitBound(ctx context.Context, name string, want bool) error {
	return d.poll(ctx, fmt.Sprintf("Deployment %s bound=%v", name, want), func(ctx context.Context) (string, error) {
		got, err := d.kube.AppsV1().Deployments(DemoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error(), nil
		}
		spec := &got.Spec.Template.Spec
		unbound := !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName })
		if want && bound(spec) || !want && unbound {
			return "", nil
		}
		return "not yet", nil
	})
}

func (d *demo) waitBindingReady(ctx context.Context) error {
	return d.poll(ctx, "GithubBinding hello-github Ready", func(ctx context.Context) (string, error) {
		u, err := d.dyn.Resource(githubBindings).Namespace(DemoNamespace).Get(ctx, "hello-github", metav1.GetOptions{})
		if err != nil {
			return err.Error(), nil
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			if m, _ := c.(map[string]any); m["type"] == "Ready" {
				if m["status"] == "True" {
					d.step("GithubBinding hello-github is Ready (%v)", m["reason"])
					return "", nil
				}
				return fmt.Sprintf("Ready=%v: %v", m["status"], m["message"]), nil
			}
		}
		return "no Ready condition yet", nil
	})
}

// printTemplate prints the volumes and mounts of the Deployment's pod
// template, the part the binding changes.
func (d *demo) printTemplate(ctx context.Context, name string) error {
	got, err := d.kube.AppsV1().Deployments(DemoNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get deployment %s: %w", name, err)
	}
	spec := got.Spec.Template.Spec
	view := map[string]any{"volumes": spec.Volumes, "initContainers": mounts(spec.InitContainers), "containers": mounts(spec.Containers)}
	data, err := json.MarshalIndent(view, "    ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    %s\n", data)
	return nil
}

func mounts(containers []corev1.Container) []map[string]any {
	out := make([]map[string]any, 0, len(containers))
	for _, c := range containers {
		out = append(out, map[string]any{"name": c.Name, "volumeMounts": c.VolumeMounts})
	}
	return out
}

// poll runs check until it reports nothing left to wait for, ctx ends or
// the demo's timeout passes; the error quotes check's last answer.
func (d *demo) poll(ctx context.Context, what string, check func(context.Context) (string, error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, d.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = check(ctx)
		return last == "" && err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last: %s)", what, err, last)
	}
	return nil
}
