package declaredbinding_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/declaredbinding"
	"github.com/bindkit/bindkit/test/declaredbinding/v1alpha1"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/tracker"
)

// rig is the DeclaredBinding kind's processes (sharedmain.Run in this test
// binary, as a user's main runs it) against the package's control plane,
// behind one webhook address that follows the newest process, as a
// Service follows the pods of a rolling update.
type rig struct {
	t      *testing.T
	env    *testenv.Environment
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	system string
	ns     string
	front  *front
	// kubeconfig is how the processes reach the kube-apiserver: its own,
	// or a test/apiproxy's.
	kubeconfig string
}

// webhookName is the kind's webhook configuration, as wiring.New names it.
var webhookName = v1alpha1.GroupVersionResource().GroupResource().String()

func newRig(t *testing.T, prefix string) *rig {
	t.Helper()
	env := controlPlane.Env(t)
	r := &rig{t: t, env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config), kubeconfig: env.KubeconfigPath}
	waitServed(t, r.dyn)
	r.system = env.CreateNamespace(t, prefix+"system-")
	r.ns = env.CreateNamespace(t, prefix)
	r.front = startFront(t)
	// One kind per control plane: the policy and the configuration are
	// cluster-scoped, so a test starts from a fresh install.
	api := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := api.Delete(t.Context(), webhookName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := policy.RemoveMutatingPolicy(t.Context(), r.kube, policy.MutatingPolicyName(v1alpha1.GroupVersionResource().GroupResource())); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s/%s", r.front.addr, v1alpha1.Resource)
	// As a deployment installs it (config/): no rules, no CA bundle; the
	// leader programs them.
	_, err := api.Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: webhookName, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Delete(context.Background(), webhookName, metav1.DeleteOptions{}) })
	return r
}

// proc is one process of the kind.
type proc struct {
	cancel context.CancelFunc
	done   chan error
	logs   *lockedBuffer
	port   int
	exited atomic.Bool
}

// start runs a process admitting the kind by policy or by webhook, with
// grace as its webhook's grace period (0: the default), and points the
// front at its webhook once it listens.
func (r *rig) start(admission policy.Admission, grace time.Duration) *proc {
	r.t.Helper()
	kind, err := declaredbinding.New()
	if err != nil {
		r.t.Fatal(err)
	}
	listenFile := filepath.Join(r.t.TempDir(), "listen-addresses.json")
	p := &proc{logs: &lockedBuffer{}, done: make(chan error, 1)}
	ctx := sharedmain.WithFlags(context.Background(), sharedmain.Flags{
		Kubeconfig:     r.kubeconfig,
		WebhookAddress: "127.0.0.1", WebhookPort: sharedmain.AnyPort, WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")},
		ProbePort: sharedmain.AnyPort, ListenAddressesFile: listenFile, MetricsAddress: "127.0.0.1:0",
		WebhookGracePeriod: grace, DeclarativeAdmission: admission,
	})
	ctx = injection.WithSystemNamespace(ctx, r.system)
	ctx = sharedmain.WithLogOutput(ctx, zapcore.AddSync(p.logs))
	ctx, p.cancel = context.WithCancel(ctx)
	go func() {
		p.done <- sharedmain.Run(ctx, "declaredbinding-controller", kind.Controller, kind.Webhook)
		p.exited.Store(true)
	}()
	r.t.Cleanup(func() { p.stop(r.t) })
	deadline := time.Now().Add(time.Minute)
	for {
		addrs, err := sharedmain.ReadListenAddresses(listenFile)
		if err == nil {
			p.port = addrs.WebhookPort()
			break
		}
		if p.exited.Load() || !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			r.t.Fatalf("the process's listen addresses: %v\nlog tail:\n%s", err, p.logs.tail(40))
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.front.to(p.port)
	return p
}

// stop ends the process and returns how long it took to return.
func (p *proc) stop(t *testing.T) time.Duration {
	if p.cancel == nil {
		return 0
	}
	start := time.Now()
	p.cancel()
	p.cancel = nil
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("sharedmain.Run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Error("sharedmain.Run did not return within two minutes of cancellation")
	}
	return time.Since(start)
}

// binding creates a DeclaredBinding of the Jobs labelled app=web that
// sets X=value in their containers.
func (r *rig) binding(name, value string) {
	r.t.Helper()
	b := &v1alpha1.DeclaredBinding{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name},
		Spec: v1alpha1.DeclaredBindingSpec{
			Subject: tracker.Reference{APIVersion: "batch/v1", Kind: "Job", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Declare: declarative.Spec{Env: []corev1.EnvVar{{Name: "X", Value: value}}},
		}}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		r.t.Fatal(err)
	}
	r.create(&unstructured.Unstructured{Object: content})
}

// create creates the Binding u and returns what the API server stored. A
// refusal as unavailable is retried: the kube-apiserver's admission
// policies (bindkit's requested-by record) know a new CRD's kind some time
// after it is served.
func (r *rig) create(u *unstructured.Unstructured) *unstructured.Unstructured {
	r.t.Helper()
	var created *unstructured.Unstructured
	r.poll("DeclaredBinding "+u.GetName()+" to be created", func() (string, error) {
		var err error
		created, err = r.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(r.ns).Create(r.t.Context(), u, metav1.CreateOptions{})
		if apierrors.IsServiceUnavailable(err) {
			return err.Error(), nil
		}
		return "", err
	})
	return created
}

// job is a Job labelled app=web, its one container named app.
func (r *rig) job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "app", Image: "app"}}}}}}
}

// xOf is the value of X in a Job's container, "" when it has none.
func xOf(j *batchv1.Job) string {
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "X" {
			return e.Value
		}
	}
	return ""
}

// waitBound polls a dry-run create until a Job is admitted with X=value.
func (r *rig) waitBound(what, value string) {
	r.t.Helper()
	r.poll(what, func() (string, error) {
		got, err := r.kube.BatchV1().Jobs(r.ns).Create(r.t.Context(), r.job("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error(), nil
		}
		if x := xOf(got); x != value {
			return fmt.Sprintf("X=%q, want %q", x, value), nil
		}
		return "", nil
	})
}

// webhookRules counts the rules of the kind's webhook.
func (r *rig) webhookRules() (int, error) {
	cfg, err := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(r.t.Context(), webhookName, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return len(cfg.Webhooks[0].Rules), nil
}

// poll calls check until it returns "" or two minutes pass.
func (r *rig) poll(what string, check func() (string, error)) {
	r.t.Helper()
	var last string
	start := time.Now()
	err := wait.PollUntilContextTimeout(r.t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		problem, err := check()
		if err != nil {
			return false, err
		}
		last = problem
		return problem == "", nil
	})
	if err != nil {
		r.t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
	r.t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// creator creates a Job every 10 ms until stopped, keeping what the API
// server returned and what it refused.
type creator struct {
	mu      sync.Mutex
	created []*batchv1.Job
	refused []string
	stop    context.CancelFunc
	done    chan struct{}
}

func (r *rig) startCreating() *creator {
	ctx, cancel := context.WithCancel(r.t.Context())
	c := &creator{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for i := 0; ctx.Err() == nil; i++ {
			sent := time.Now()
			got, err := r.kube.BatchV1().Jobs(r.ns).Create(ctx, r.job(fmt.Sprintf("c-%d", i)), metav1.CreateOptions{})
			c.mu.Lock()
			switch {
			case err == nil:
				c.created = append(c.created, got)
			case ctx.Err() == nil:
				c.refused = append(c.refused, fmt.Sprintf("Job c-%d sent %s: %v", i, sent.Format("15:04:05.000"), err))
			}
			c.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	r.t.Cleanup(c.end)
	return c
}

func (c *creator) end() { c.stop(); <-c.done }

// front is the kind's webhook address: it forwards each connection to the
// port of the newest process, as a Service forwards to a ready pod.
type front struct {
	addr string
	port atomic.Int64
}

func startFront(t *testing.T) *front {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{addr: lis.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { f.forward(in) })
		}
	})
	return f
}

// to points the front at port.
func (f *front) to(port int) { f.port.Store(int64(port)) }

func (f *front) forward(in net.Conn) {
	defer in.Close()
	out, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", f.port.Load()))
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(in, out); in.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}

// lockedBuffer is a log the process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the last n lines of the log.
func (b *lockedBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
