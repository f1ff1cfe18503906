package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/testenv"
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
	if err := BuildController(ctx, opts.RepoRoot, binary); err != nil {
		return err
	}
	if err := d.createNamespaces(ctx); err != nil {
		return err
	}
	d.step("starting the controller; its webhook listens on 127.0.0.1, on a port the kernel picks")
	ctrl, err := StartController(env, binary, "--disable-ha")
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := ctrl.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		} else if err == nil {
			d.step("controller stopped with SIGTERM and exited 0")
		}
		if err != nil {
			err = fmt.Errorf("%w\nlast lines of the controller's log:\n%s", err, ctrl.LogTail(30))
		}
	}()
	d.step("installing the webhook configuration, pointed at https://127.0.0.1:%d", ctrl.WebhookPort)
	if err := d.installWebhook(ctx, ctrl.WebhookPort); err != nil {
		return err
	}
	if err := WaitReady(ctx, d.kube, ctrl.WebhookPort, opts.Timeout); err != nil {
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

// createNamespaces creates the controller's namespace and the demo's.
func (d *demo) createNamespaces(ctx context.Context) error {
	for _, ns := range []string{SystemNamespace, DemoNamespace} {
		_, err := d.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	return nil
}

// installWebhook creates the webhook configuration config/ installs in a
// cluster, with a URL client config to 127.0.0.1:port, where the
// controller's webhook listens, instead of a Service.
func (d *demo) installWebhook(ctx context.Context, port int) error {
	cfg, err := WebhookConfiguration(d.opts.RepoRoot, port)
	if err != nil {
		return err
	}
	if _, err := d.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", WebhookConfigName, err)
	}
	return nil
}

// walkthrough binds an existing Deployment, then a new one at admission,
// then deletes the first Binding and sees its Deployment unbound.
func (d *demo) walkthrough(ctx context.Context) error {
	binding, err := d.bindExisting(ctx)
	if err != nil {
		return err
	}
	if err := d.bindAtAdmission(ctx, binding); err != nil {
		return err
	}
	return d.unbind(ctx)
}

// bindExisting creates Deployment hello and a GithubBinding naming it, and
// shows the template and the pods bound. It returns the Binding.
func (d *demo) bindExisting(ctx context.Context) (*unstructured.Unstructured, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: "github-token"},
		StringData: map[string]string{"token": "not-a-real-token"}}
	if _, err := d.kube.CoreV1().Secrets(DemoNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create secret: %w", err)
	}
	d.step("creating Deployment demo/hello")
	if _, err := d.kube.AppsV1().Deployments(DemoNamespace).Create(ctx, deployment("hello"), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create deployment hello: %w", err)
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
		return nil, fmt.Errorf("create GithubBinding: %w", err)
	}
	if err := d.waitBound(ctx, "hello", true); err != nil {
		return nil, err
	}
	d.step("the reconciler bound Deployment hello; its pod template is now:")
	if err := d.printTemplate(ctx, "hello"); err != nil {
		return nil, err
	}
	if err := d.showPods(ctx, "hello", true); err != nil {
		return nil, err
	}
	if err := d.waitBindingReady(ctx); err != nil {
		return nil, err
	}
	return binding, nil
}

// bindAtAdmission creates a second GithubBinding, naming a Deployment
// not created yet, then the Deployment, which must come back bound.
func (d *demo) bindAtAdmission(ctx context.Context, binding *unstructured.Unstructured) error {
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
		if !Bound(&got.Spec.Template.Spec) {
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
	if !Bound(&created.Spec.Template.Spec) {
		return errors.New("Deployment newcomer was created without the binding: admission did not bind it")
	}
	d.step("Deployment newcomer came back from its create already bound (volume %s)", volumeName)
	return nil
}

// unbind deletes the first GithubBinding and shows Deployment hello's
// template and pods unbound.
func (d *demo) unbind(ctx context.Context) error {
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
	if err := d.printTemplate(ctx, "hello"); err != nil {
		return err
	}
	return d.showPods(ctx, "hello", false)
}

// showPods waits until the Deployment's rollout is complete and its pods
// run, Ready, with the binding or (wantBound false) without it, and prints
// them: the control plane runs workloads (kube-scheduler and kwok's fake
// nodes), so the pods of a bound Deployment are seen to change.
func (d *demo) showPods(ctx context.Context, name string, wantBound bool) error {
	var pods []corev1.Pod
	if err := d.poll(ctx, fmt.Sprintf("pods of Deployment %s running bound=%v", name, wantBound), func(ctx context.Context) (string, error) {
		dep, err := d.kube.AppsV1().Deployments(DemoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error(), nil
		}
		want := int32(1)
		if dep.Spec.Replicas != nil {
			want = *dep.Spec.Replicas
		}
		s := dep.Status
		if s.ObservedGeneration != dep.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			return fmt.Sprintf("rollout in progress (%d updated, %d available of %d)", s.UpdatedReplicas, s.AvailableReplicas, want), nil
		}
		list, err := d.kube.CoreV1().Pods(DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err.Error(), nil
		}
		pods = list.Items
		for _, p := range pods {
			hasVolume := slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName })
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || hasVolume != wantBound || wantBound && !Bound(&p.Spec) {
				return fmt.Sprintf("pod %s: phase %s, binding volume %v", p.Name, p.Status.Phase, hasVolume), nil
			}
		}
		if int32(len(pods)) != want {
			return fmt.Sprintf("%d pods, want %d", len(pods), want), nil
		}
		return "", nil
	}); err != nil {
		return err
	}
	for _, p := range pods {
		ready := "not Ready"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = "Ready"
			}
		}
		var volumes []string
		for _, v := range p.Spec.Volumes {
			volumes = append(volumes, v.Name)
		}
		with := "without the binding's volume"
		if wantBound {
			with = "with the binding's volume " + volumeName
		}
		d.step("pod %s is %s and %s on node %s, %s (volumes: %v)", p.Name, p.Status.Phase, ready, p.Spec.NodeName, with, volumes)
	}
	return nil
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

// Bound reports whether spec carries the demo Binding's volume and a mount
// of it in every container and init container (the e2e tests check pods
// with it too).
func Bound(spec *corev1.PodSpec) bool {
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
		if want && Bound(spec) || !want && unbound {
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
