package fixturebinding_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/fixturebinding"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/tracker"
)

// rig is one cluster with both fixture kinds installed, and a controller
// process (sharedmain.Run in this test binary, with the flags a deployment
// sets and nothing kinder) serving both kinds' reconcilers and webhooks.
type rig struct {
	t      *testing.T
	env    *testenv.Environment
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	system string
	port   int // the webhook's, as the process reported it
	// listenFile is where the running process reports its ports.
	listenFile string
	logs       *lockedBuffer
	done       chan error
	cancel     context.CancelFunc
}

func newRig(t *testing.T) *rig {
	t.Helper()
	env := controlPlane.Env(t)
	r := &rig{t: t, env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config), logs: &lockedBuffer{}}
	r.system = env.CreateNamespace(t, "fixture-system-")
	r.start()
	t.Cleanup(r.stop)
	for _, kind := range []string{fixturebinding.Kind, fixturebinding.OtherKind} {
		gvr := fixturebinding.GVR(kind)
		name := gvr.GroupResource().String()
		url := fmt.Sprintf("https://127.0.0.1:%d/%s", r.port, gvr.Resource)
		_, err := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    name,
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return r
}

// start runs the process: both kinds, controller and webhook each. It
// returns once the process has bound its webhook to a port the kernel
// picked (port); on a restart it points the webhook configurations at the
// new port, as a Service follows a restarted pod.
func (r *rig) start() {
	r.t.Helper()
	previous := r.port
	r.listenFile = filepath.Join(r.t.TempDir(), "listen-addresses.json")
	ctx, ctors := r.process(false)
	ctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.done = make(chan error, 1)
	go func() { r.done <- sharedmain.Run(ctx, "fixture-controller", ctors...) }()
	deadline := time.Now().Add(time.Minute)
	for {
		addrs, err := sharedmain.ReadListenAddresses(r.listenFile)
		if err == nil {
			r.port = addrs.WebhookPort()
			break
		}
		r.running()
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			r.t.Fatalf("the process's listen addresses: %v\nlog tail:\n%s", err, r.logs.tail(40))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if previous == 0 || previous == r.port {
		return
	}
	for _, kind := range []string{fixturebinding.Kind, fixturebinding.OtherKind} {
		gvr := fixturebinding.GVR(kind)
		url := fmt.Sprintf("https://127.0.0.1:%d/%s", r.port, gvr.Resource)
		configs := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg, err := configs.Get(context.Background(), gvr.GroupResource().String(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig.URL = &url
			}
			_, err = configs.Update(context.Background(), cfg, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			r.t.Fatalf("point the webhook of %s at the restarted process: %v", kind, err)
		}
	}
}

// uninstall runs the process once with --uninstall and returns its error.
func (r *rig) uninstall() error {
	r.t.Helper()
	ctx, ctors := r.process(true)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return sharedmain.Run(ctx, "fixture-controller", ctors...)
}

// process returns the context and constructors of the process.
func (r *rig) process(uninstall bool) (context.Context, []sharedmain.Constructor) {
	r.t.Helper()
	var ctors []sharedmain.Constructor
	for _, kind := range []string{fixturebinding.Kind, fixturebinding.OtherKind} {
		b, err := fixturebinding.New(kind)
		if err != nil {
			r.t.Fatal(err)
		}
		ctors = append(ctors, b.Controller, b.Webhook)
	}
	ctx := sharedmain.WithFlags(context.Background(), sharedmain.Flags{
		Kubeconfig:     r.env.KubeconfigPath,
		WebhookAddress: "127.0.0.1", WebhookPort: sharedmain.AnyPort, WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")},
		ProbePort: sharedmain.AnyPort, ListenAddressesFile: r.listenFile,
		WebhookGracePeriod: -1, MetricsAddress: "127.0.0.1:0", Uninstall: uninstall,
	})
	ctx = injection.WithSystemNamespace(ctx, r.system)
	ctx = sharedmain.WithLogOutput(ctx, zapcore.AddSync(r.logs))
	return ctx, ctors
}

// stop ends the process and reports how it ended.
func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("sharedmain.Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		r.t.Error("sharedmain.Run did not return within a minute of cancellation")
	}
}

// running fails the test if the process has ended.
func (r *rig) running() {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.cancel = nil
		r.t.Fatalf("the process ended: %v\nlog tail:\n%s", err, r.logs.tail(40))
	default:
	}
}

// deployment creates a Deployment with labels and returns what the API
// server stored (after admission).
func (r *rig) deployment(ns, name string, labels map[string]string, containers ...string) (*appsv1.Deployment, error) {
	return r.kube.AppsV1().Deployments(ns).Create(context.Background(), newDeployment(ns, name, labels, containers...), metav1.CreateOptions{})
}

// newDeployment is a Deployment ns/name with labels and one container per
// name in containers (one called app when none).
func newDeployment(ns, name string, labels map[string]string, containers ...string) *appsv1.Deployment {
	if len(containers) == 0 {
		containers = []string{"app"}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pod": name}}},
		},
	}
	for _, c := range containers {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: c})
	}
	return d
}

// binding creates a fixture Binding of kind selecting app=app in ns.
func (r *rig) binding(kind, ns, name, app string, spec fixturebinding.Spec) {
	r.t.Helper()
	if err := r.tryBinding(kind, ns, name, app, spec); err != nil {
		r.t.Fatal(err)
	}
}

// tryBinding is binding, returning the failure.
func (r *rig) tryBinding(kind, ns, name, app string, specs ...fixturebinding.Spec) error {
	var spec fixturebinding.Spec
	if len(specs) > 0 {
		spec = specs[0]
	}
	spec.Subject = tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
	b := &fixturebinding.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: fixturebinding.Group + "/" + fixturebinding.Version, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       spec,
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return err
	}
	_, err = r.dyn.Resource(fixturebinding.GVR(kind)).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
	return err
}

// ready reads the Binding's Ready condition.
func (r *rig) ready(kind, ns, name string) (map[string]any, error) {
	u, err := r.dyn.Resource(fixturebinding.GVR(kind)).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == "Ready" {
			return c, nil
		}
	}
	return nil, nil
}

// waitReady waits until the Binding's Ready has status and reason, and
// returns its message.
func (r *rig) waitReady(kind, ns, name, status, reason string) string {
	r.t.Helper()
	var last map[string]any
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		c, err := r.ready(kind, ns, name)
		last = c
		return err == nil && c != nil && c["status"] == status && c["reason"] == reason, nil
	})
	if err != nil {
		r.t.Fatalf("%s %s/%s: waiting for Ready %s %s: %v (last: %v)\nlog tail:\n%s", kind, ns, name, status, reason, err, last, r.logs.tail(30))
	}
	msg, _ := last["message"].(string)
	return msg
}

// env returns the value of the env var kind sets in the first container of
// the Deployment, and whether it is set.
func env(d *appsv1.Deployment, kind string) (string, bool) {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == fixturebinding.EnvName(kind) {
			return e.Value, true
		}
	}
	return "", false
}

// waitBound waits until the Deployment carries kind's env var with value.
func (r *rig) waitBound(ns, name, kind, value string) {
	r.t.Helper()
	var last *appsv1.Deployment
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := r.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = d
		v, ok := env(d, kind)
		return ok && v == value, nil
	})
	if err != nil {
		r.t.Fatalf("Deployment %s/%s: waiting for %s=%s: %v (last env: %v)\nlog tail:\n%s", ns, name, fixturebinding.EnvName(kind), value, err, last.Spec.Template.Spec.Containers[0].Env, r.logs.tail(30))
	}
}

// lockedBuffer is a log output sharedmain may write from any goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Sync() error { return nil }

// count counts the lines holding every substring.
func (b *lockedBuffer) count(substrings ...string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for line := range strings.SplitSeq(b.buf.String(), "\n") {
		all := true
		for _, s := range substrings {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(b.buf.String(), "\n")
	for i := range lines {
		if len(lines[i]) > 600 {
			lines[i] = lines[i][:600] + "..."
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
