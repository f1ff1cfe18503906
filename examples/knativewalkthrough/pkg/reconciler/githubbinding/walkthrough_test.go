package githubbinding_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/knativewalkthrough/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/knativewalkthrough/pkg/github"
	"github.com/bindkit/bindkit/examples/knativewalkthrough/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/testenv"
)

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{"../../../config/githubbinding.yaml"}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

var githubBindings = v1alpha1.SchemeGroupVersion.WithResource("githubbindings")

// timeout bounds every wait; it guards against hangs and proves nothing
// about speed.
const timeout = 60 * time.Second

// TestWalkthroughBindsDeploymentWithRealAPIServer runs the ported
// walkthrough's constructors under sharedmain (Run, the error-returning
// MainWithContext), with
// sharedmain's default settings (leader election included) and only what a
// binary needs to reach the test's kube-apiserver, and checks what the
// walkthrough promises: a Deployment that existed before the process
// started is bound by the reconciler, one created later is bound at
// admission, and deleting the Binding unbinds its subject.
func TestWalkthroughBindsDeploymentWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	start := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	systemNS := env.CreateNamespace(t, "walkthrough-system-")
	ns := env.CreateNamespace(t, "walkthrough-")

	// Before the process starts: a Deployment and the Binding naming it.
	createDeployment(t, kube, ns, "web")
	createBinding(t, dyn, ns, "gh-web", "web")

	logs, port := startMain(t, env, systemNS)
	installWebhookConfiguration(t, kube, port)

	// The reconciler binds what existed before start-up.
	bound := waitDeployment(t, kube, ns, "web", "bound by the reconciler", isBound)
	step("Deployment web bound")
	waitReady(t, dyn, ns, "gh-web")
	step("GithubBinding gh-web Ready")

	// A Binding for a Deployment that does not exist yet: the webhook binds
	// the Deployment as it is created. The create's own answer shows it,
	// before any reconcile could have patched it.
	createBinding(t, dyn, ns, "gh-later", "later")
	poll(t, "the webhook binds a dry-run create of Deployment later", func(ctx context.Context) (bool, error) {
		got, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "later"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil // the webhook may not serve yet
		}
		return isBound(got) == "", nil
	})
	step("the webhook binds Deployment later")
	later, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "later"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment later: %v\nprocess logs:\n%s", err, logs)
	}
	if diff := isBound(later); diff != "" {
		t.Errorf("Deployment later as created (-want +got):\n%s", diff)
	}
	auditWalkthrough(t, env, ns)

	// Deleting the Binding unbinds its subject, and the finalizer lets go.
	if err := dyn.Resource(githubBindings).Namespace(ns).Delete(ctx, "gh-web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete GithubBinding gh-web: %v", err)
	}
	waitDeployment(t, kube, ns, "web", "unbound after the Binding's deletion", isUnbound)
	step("Deployment web unbound")
	poll(t, "GithubBinding gh-web disappears", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(githubBindings).Namespace(ns).Get(ctx, "gh-web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	step("GithubBinding gh-web gone")

	// The bound Deployment was patched, not rewritten: its own fields stay.
	if got := bound.Spec.Template.Spec.Containers[0].Image; got != "registry.example/web:1" {
		t.Errorf("bound Deployment's image = %q, want it untouched", got)
	}
	auditWalkthrough(t, env, ns)
}

// auditWalkthrough runs the audit over ns while the process runs, with the
// walkthrough's GithubBindings' Do: every record must be the truth.
func auditWalkthrough(t *testing.T, env *testenv.Environment, ns string) {
	t.Helper()
	kind := audit.Kind{Resource: githubBindings, Decode: func(u *unstructured.Unstructured) (psbinding.Bindable, error) {
		b := &v1alpha1.GithubBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
			return nil, fmt.Errorf("GithubBinding %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		return b, nil
	}}
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns, Kinds: []audit.Kind{kind}})
}

// startMain runs the walkthrough's constructors as its cmd/webhook does,
// with the flags a binary would get on its command line, and stops them when
// the test ends, failing it if they do not stop cleanly. It returns the
// process's log and the port its webhook reported.
func startMain(t *testing.T, env *testenv.Environment, systemNS string) (fmt.Stringer, int) {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	listenFile := filepath.Join(t.TempDir(), "listen-addresses.json")
	ctx = sharedmain.WithFlags(ctx, sharedmain.Flags{
		Kubeconfig:     env.KubeconfigPath,
		WebhookAddress: "127.0.0.1",
		WebhookIPSANs:  []net.IP{net.ParseIP("127.0.0.1")},
		// Only shutdown waits for it: the default (a Service's endpoints
		// to update) would add its length to every run of the test.
		WebhookGracePeriod: time.Second,
		// Every listener on a port the kernel picks, reported in a file:
		// tests run side by side.
		WebhookPort:         sharedmain.AnyPort,
		ProbePort:           sharedmain.AnyPort,
		MetricsAddress:      "127.0.0.1:0",
		ListenAddressesFile: listenFile,
	})
	ctx = injection.WithSystemNamespace(ctx, systemNS)
	ctx = sharedmain.WithLogOutput(ctx, logs)

	done := make(chan error, 1)
	go func() {
		// MainWithContext, which the example's main calls, exits the
		// process on failure; Run is the same, returning the error.
		done <- sharedmain.Run(ctx, "webhook", githubbinding.NewController, githubbinding.NewWebhook)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sharedmain.Run after cancel: %v", err)
			}
		case <-time.After(timeout):
			t.Errorf("sharedmain.Run did not return within %v of cancellation", timeout)
		}
		if t.Failed() {
			t.Logf("process logs:\n%s", logs)
		}
	})
	// The wait ends when the process does.
	wait, stopWaiting := context.WithTimeout(ctx, timeout)
	defer stopWaiting()
	go func() {
		select {
		case err := <-done:
			done <- err // for the cleanup
			stopWaiting()
		case <-wait.Done():
		}
	}()
	addrs, err := sharedmain.WaitListenAddresses(wait, listenFile)
	if err != nil {
		t.Fatalf("%v\nprocess logs:\n%s", err, logs)
	}
	return logs, addrs.WebhookPort()
}

// installWebhookConfiguration creates what a knative user's config/ ships:
// the MutatingWebhookConfiguration the admission controller then programs,
// reaching the webhook on 127.0.0.1 instead of through a Service.
func installWebhookConfiguration(t *testing.T, kube kubernetes.Interface, port int) {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	_, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: githubbinding.WebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    githubbinding.WebhookName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           new(admissionregistrationv1.Fail),
			SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create MutatingWebhookConfiguration: %v", err)
	}
	t.Cleanup(func() {
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), githubbinding.WebhookName, metav1.DeleteOptions{})
	})
}

func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "setup", Image: "registry.example/setup:1"}},
					Containers: []corev1.Container{
						{Name: "app", Image: "registry.example/" + name + ":1"},
						{Name: "sidecar", Image: "registry.example/sidecar:1"},
					},
				},
			},
		},
	}
}

func createDeployment(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, name), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment %s/%s: %v", ns, name, err)
	}
}

func createBinding(t *testing.T, dyn dynamic.Interface, ns, name, subject string) {
	t.Helper()
	b := &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "GithubBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
	b.Spec.Subject.APIVersion, b.Spec.Subject.Kind, b.Spec.Subject.Name = "apps/v1", "Deployment", subject
	b.Spec.Secret.Name = "github-token"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(githubBindings).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GithubBinding %s/%s: %v", ns, name, err)
	}
}

// mounts returns, per container (init containers first), the mount paths of
// the github volume, and whether the pod declares that volume.
func mounts(d *appsv1.Deployment) (map[string][]string, bool) {
	spec := d.Spec.Template.Spec
	got := map[string][]string{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, m := range c.VolumeMounts {
			if m.Name == github.VolumeName {
				got[c.Name] = append(got[c.Name], m.MountPath)
			}
		}
	}
	volume := slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == github.VolumeName && v.Secret != nil && v.Secret.SecretName == "github-token"
	})
	return got, volume
}

// isBound returns "" when every container mounts the Secret once, else
// the difference.
func isBound(d *appsv1.Deployment) string {
	got, volume := mounts(d)
	want := map[string][]string{"setup": {github.MountPath}, "app": {github.MountPath}, "sidecar": {github.MountPath}}
	if diff := cmp.Diff(want, got); diff != "" || !volume {
		return fmt.Sprintf("volume declared: %v; mounts:\n%s", volume, diff)
	}
	return ""
}

// isUnbound returns "" when nothing of the Binding is left, else what is.
func isUnbound(d *appsv1.Deployment) string {
	got, volume := mounts(d)
	if len(got) > 0 || volume {
		return fmt.Sprintf("volume declared: %v; mounts: %v", volume, got)
	}
	return ""
}

func waitDeployment(t *testing.T, kube kubernetes.Interface, ns, name, what string, check func(*appsv1.Deployment) string) *appsv1.Deployment {
	t.Helper()
	var last *appsv1.Deployment
	var diff string
	poll(t, "Deployment "+name+" "+what, func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			diff = err.Error()
			return false, nil
		}
		last, diff = d, check(d)
		return diff == "", nil
	}, func() string { return diff })
	return last
}

// waitReady waits for the Binding's Ready condition to be True.
func waitReady(t *testing.T, dyn dynamic.Interface, ns, name string) {
	t.Helper()
	var conditions any
	poll(t, "GithubBinding "+name+" Ready", func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(githubBindings).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conditions, _, _ = unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions.([]any) {
			if c, _ := c.(map[string]any); c["type"] == "Ready" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}, func() string { return fmt.Sprint("conditions: ", conditions) })
}

// poll runs cond until it holds, failing t after timeout with what last
// reports, if given.
func poll(t *testing.T, what string, cond wait.ConditionWithContextFunc, last ...func() string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, cond); err != nil {
		detail := ""
		for _, l := range last {
			detail += "\n" + l()
		}
		t.Fatalf("waiting for %s: %v%s", what, err, detail)
	}
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
