package psbinding

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
)

// harness runs the whole EnvBinding machinery against the real
// kube-apiserver: the certificates reconciler, the webhook server on
// 127.0.0.1, the admission controller that programs a URL-config
// MutatingWebhookConfiguration scoped to the test's namespaces, and the
// BaseReconciler over the slim subject cache, as a process wires them.
type harness struct {
	ns      string // where the Bindings and their subjects live
	system  string // the webhook's namespace
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	ac      *AdmissionReconciler
	webhook string // the MutatingWebhookConfiguration's name

	opts harnessOptions
	// The running "process": stop ends it; restart starts another.
	reconciler *controller.Impl
	subjects   duck.InformerFactory // the reconciler's cache of its subjects' metadata
	requests   *requestCounter      // the reconciler's requests to the API server
	stop       func()
}

type harnessOptions struct {
	namespaces []string // more namespaces the webhook serves
	noWebhook  bool     // no webhook configuration: the reconciler alone
}

type harnessOption func(*harnessOptions)

// withNamespaces makes the webhook configuration cover namespaces too.
func withNamespaces(namespaces ...string) harnessOption {
	return func(o *harnessOptions) { o.namespaces = append(o.namespaces, namespaces...) }
}

// withoutWebhook runs no webhook configuration: only the reconciler binds.
func withoutWebhook() harnessOption { return func(o *harnessOptions) { o.noWebhook = true } }

const certSecret = "webhook-certs"

func startHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	env := controlPlane.Env(t)
	h := &harness{
		kube: kubernetes.NewForConfigOrDie(env.Config),
		dyn:  dynamic.NewForConfigOrDie(env.Config),
	}
	for _, o := range opts {
		o(&h.opts)
	}
	h.system = env.CreateNamespace(t, "bindkit-system-")
	h.ns = env.CreateNamespace(t, "subjects-")
	h.webhook = "envbindings-" + h.ns
	h.start(t)
	t.Cleanup(func() {
		// The configuration goes first: with failurePolicy Fail, a stopped
		// server would block every later create in the namespace.
		h.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), h.webhook, metav1.DeleteOptions{})
		h.stop()
	})
	return h
}

// restart stops the controller process and starts a new one over the same
// namespaces, with empty caches, as a crashed and restarted controller.
func (h *harness) restart(t *testing.T) {
	t.Helper()
	h.stop()
	h.start(t)
}

// stopController stops the process without starting another; restart
// brings it back.
func (h *harness) stopController() {
	h.stop()
	h.stop = func() {}
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	env := controlPlane.Env(t)
	ctx, cancel := context.WithCancel(context.Background())
	logger := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))

	certs, err := certificates.NewReconciler(h.kube, certificates.Options{
		SecretName: certSecret, Namespace: h.system, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, certificates.ReconcilerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Reconcile(ctx, certs.Key()); err != nil {
		t.Fatalf("certificates: %v", err)
	}

	stop := make(chan struct{})
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(h.kube, 0, informers.WithNamespace(h.system))
	secrets := kubeInformers.Core().V1().Secrets()
	bindingInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(h.dyn, 0, metav1.NamespaceAll, nil)
	bindings := bindingInformers.ForResource(envBindingsGVR)

	listAll := func() ([]Bindable, error) {
		objs, err := bindings.Lister().List(labels.Everything())
		if err != nil {
			return nil, err
		}
		out := make([]Bindable, 0, len(objs))
		for _, o := range objs {
			b, err := toEnvBinding(o)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, nil
	}
	get := func(ns, name string) (Bindable, error) {
		obj, err := bindings.Lister().ByNamespace(ns).Get(name)
		if err != nil {
			return nil, err
		}
		return toEnvBinding(obj)
	}

	// The reconciler's own clients count what it sends.
	h.requests = &requestCounter{}
	counted := rest.CopyConfig(env.Config)
	counted.Wrap(h.requests.wrap)
	var reconcilerImpl *controller.Impl
	enqueue := func(o tracker.Observer) { reconcilerImpl.EnqueueNamespacedName(o.NamespacedName) }
	trk := tracker.New(enqueue, time.Hour)
	// The dynamic client of the path users run (injection.New's).
	dynamicClient, err := duck.NewDynamicClient(counted)
	if err != nil {
		t.Fatal(err)
	}
	r := &BaseReconciler{
		GVR: envBindingsGVR, Get: get, DynamicClient: dynamicClient, Mapper: mapper, Tracker: trk,
		Recorder: controller.NewEventRecorder(ctx, h.kube, nil, "envbindings"),
	}
	handler, err := NewSubjectEventHandler(SubjectEventOptions{Tracker: trk, Notify: enqueue, RollingOut: r.RollingOut,
		OnError: func(err error) { t.Errorf("tracker: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	r.Factory = &duck.EnqueueInformerFactory{
		Delegate:     &duck.CachedInformerFactory{Stop: stop, Delegate: &duck.MetadataInformerFactory{Client: metadata.NewForConfigOrDie(counted), Mapper: mapper}},
		EventHandler: handler,
	}
	reconcilerImpl = controller.NewImpl(r, logger, "envbindings")
	h.reconciler, h.subjects = reconcilerImpl, r.Factory
	// The handlers below read this process's reconciler, not h.ac: the
	// informers of a stopped process may still deliver an event while
	// restart sets h.ac to the next process's.
	ac, err := NewAdmissionReconciler(AdmissionConfig{
		ConfigurationName: h.webhook, WebhookName: "envbindings.test.bindkit.dev", Path: "/envbindings",
		ListAll: listAll, KubeClient: h.kube, Mapper: mapper,
		SecretLister: secrets.Lister(), SecretName: certSecret, SystemNamespace: h.system, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.ac = ac
	acImpl := controller.NewImpl(ac, logger, "envbindings-webhook")
	bindings.Informer().AddEventHandler(controller.HandleAll(func(obj any) {
		reconcilerImpl.Enqueue(obj)
		acImpl.EnqueueKey(ac.Key())
	}))
	secrets.Informer().AddEventHandler(controller.HandleAll(func(any) { acImpl.EnqueueKey(ac.Key()) }))
	kubeInformers.Start(stop)
	bindingInformers.Start(stop)
	kubeInformers.WaitForCacheSync(stop)
	bindingInformers.WaitForCacheSync(stop)

	server, err := webhook.New(webhook.Options{SecretName: certSecret, GracePeriod: -1, Logger: logger}, secrets.Lister().Secrets(h.system), ac)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !h.opts.noWebhook {
		h.installWebhookConfiguration(t, "https://"+ln.Addr().String())
	}

	reconcilerImpl.Promote()
	acImpl.Promote()
	var wg sync.WaitGroup
	wg.Go(func() { server.Serve(ctx, ln) })
	wg.Go(func() { reconcilerImpl.Run(ctx, 2) })
	wg.Go(func() { acImpl.Run(ctx, 1) })
	h.stop = func() {
		cancel()
		close(stop)
		wg.Wait()
	}
}

// requestCounter counts the requests a client sends, by method and path.
type requestCounter struct {
	mu   sync.Mutex
	sent []string
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			c.mu.Lock()
			c.sent = append(c.sent, req.Method+" "+req.URL.Path)
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// since returns the requests sent since mark, a value of mark.
func (c *requestCounter) since(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent[mark:])
}

func (c *requestCounter) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sent)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// installWebhookConfiguration creates what config/ installs in a cluster: a
// configuration with one webhook, its client config and failure policy,
// here scoped to the test's namespaces; a restarted harness points the
// existing one at its new server.
func (h *harness) installWebhookConfiguration(t *testing.T, url string) {
	t.Helper()
	if current, err := h.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), h.webhook, metav1.GetOptions{}); err == nil {
		current.Webhooks[0].ClientConfig.URL = &url
		if _, err := h.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(context.Background(), current, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("repoint MutatingWebhookConfiguration: %v", err)
		}
		return
	}
	_, err := h.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: h.webhook},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "envbindings.test.bindkit.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: append([]string{h.ns}, h.opts.namespaces...)},
			}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("install MutatingWebhookConfiguration: %v", err)
	}
}

func toEnvBinding(obj runtime.Object) (*envBinding, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("lister holds %T", obj)
	}
	b := &envBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("envbinding %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return b, nil
}

// eventually polls cond every 100ms for up to 30s; cond returns a
// description of what it still waits for, or "" when satisfied.
// An error is retried too (a webhook the kube-apiserver has not loaded
// yet, a cache not synced), and reported if it is the last one.
func eventually(t *testing.T, what string, cond func() (string, error)) {
	t.Helper()
	var (
		last    string
		lastErr error
	)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last, lastErr = cond()
		return last == "" && lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %s; last error: %v)", what, err, last, lastErr)
	}
}

// waitCachedLabel waits until the reconciler's cache of Deployments shows
// the Deployment name of h.ns with label set to value: what the reconciler
// decides from its cache (who is excluded) follows a write only once the
// write's event has arrived.
func (h *harness) waitCachedLabel(t *testing.T, name, label, value string) {
	t.Helper()
	waitCachedDeployment(t, h.subjects, h.ns, name, 30*time.Second, func(d *metav1.PartialObjectMetadata) bool {
		return d.GetLabels()[label] == value
	})
}
