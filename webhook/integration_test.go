package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/certificates"
)

const admittedAnnotation = "bindkit.dev/admitted"

// annotatingController adds an annotation that says whether the request was
// a dry run. Requests for objects named burst-* take a while, so a burst of
// them needs many connections at once.
type annotatingController struct {
	synced cache.InformerSynced
}

func (c *annotatingController) Path() string    { return "/mutate" }
func (c *annotatingController) HasSynced() bool { return c.synced() }
func (c *annotatingController) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if strings.HasPrefix(req.Name, "burst-") {
		time.Sleep(100 * time.Millisecond)
	}
	value := "yes"
	if IsDryRun(ctx) {
		value = "dry-run"
	}
	return PatchResponse([]jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/annotations/bindkit.dev~1admitted", Value: value}})
}

// acceptLog records the source IP and time of every accepted connection.
type acceptLog struct {
	net.Listener
	mu       sync.Mutex
	accepted []acceptedConn
}

type acceptedConn struct {
	from string
	at   time.Time
}

func (l *acceptLog) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.accepted = append(l.accepted, acceptedConn{c.RemoteAddr().(*net.TCPAddr).IP.String(), time.Now()})
		l.mu.Unlock()
	}
	return c, err
}

func (l *acceptLog) since(from string, t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.accepted {
		if a.from == from && a.at.After(t) {
			n++
		}
	}
	return n
}

// loadStats counts successes and failures of one kind of client.
type loadStats struct {
	ok       atomic.Int64
	mu       sync.Mutex
	failures []string
}

func (s *loadStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
}

// TestCertificateRotationUnderLoadWithRealAPIServer runs the certificates
// reconciler, the webhook server and the real kube-apiserver together: the
// reconciler creates the Secret, the test copies its CA bundle into the
// MutatingWebhookConfiguration (an admission controller's job), the
// kube-apiserver calls the server over TLS
// on 127.0.0.1, and the serving certificate is rotated while direct TLS
// clients and kube-apiserver dry-run creates keep coming. Not one handshake
// or admission may fail, and both kinds of client must handshake with the
// new certificate.
func TestCertificateRotationUnderLoadWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "webhook-")
	const secretName = "webhook-certs"

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listener := &acceptLog{Listener: ln}
	hookURL := "https://" + ln.Addr().String() + "/mutate"

	// The configuration starts without a caBundle; it gets the Secret's.
	configName := "bindkit-webhook-" + ns
	none, fail, timeout := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail, int32(10)
	_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: configName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutate.webhook.bindkit.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &hookURL},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create MutatingWebhookConfiguration: %v", err)
	}
	t.Cleanup(func() {
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), configName, metav1.DeleteOptions{})
	})

	// Certificates, issued six and a half days ago so that "now" falls in
	// the serving certificate's rotation window.
	var clockMu sync.Mutex
	clock := time.Now().Add(-(6*24 + 12) * time.Hour)
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	var enqueueMu sync.Mutex
	var lastEnqueue time.Duration
	reconciler, err := certificates.NewReconciler(kube, certificates.Options{
		SecretName:  secretName,
		Namespace:   ns,
		ServiceName: "bindkit-webhook",
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, certificates.ReconcilerOptions{Clock: now, EnqueueAfter: func(_ string, d time.Duration) {
		enqueueMu.Lock()
		defer enqueueMu.Unlock()
		lastEnqueue = d
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := reconciler.Reconcile(ctx, reconciler.Key()); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	keys := certificates.DefaultDataKeys()
	before := getSecret(t, kube, ns, secretName)
	config, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	config.Webhooks[0].ClientConfig.CABundle = before.Data[keys.CACert]
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, config, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set caBundle: %v", err)
	}

	// The server reads the Secret through an informer's lister.
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	secrets := factory.Core().V1().Secrets()
	lister := secrets.Lister().Secrets(ns)
	synced := secrets.Informer().HasSynced
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)

	core, logs := observer.New(zapcore.WarnLevel)
	server, err := New(Options{SecretName: secretName, GracePeriod: -1, Logger: zap.New(core)}, lister, &annotatingController{synced: synced})
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Serve(serveCtx, listener) }()
	defer func() {
		stopServing()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	// Load: direct TLS clients open a new connection per request, from
	// 127.0.0.2 so their connections can be told from the kube-apiserver's.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(before.Data[keys.CACert]) {
		t.Fatal("CA bundle does not parse")
	}
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}

	// Until the informer has the Secret there is no certificate to serve and
	// handshakes fail; /readyz says when that is over.
	waitFor(t, "/readyz", func() bool {
		resp, err := direct.Get("https://" + ln.Addr().String() + ReadyzPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	logs.TakeAll()

	// The kube-apiserver learns of the caBundle through an informer.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Logf("waiting for the webhook: %v", err)
			return false, nil
		}
		return got.Annotations[admittedAnnotation] == "dry-run", nil
	})
	if err != nil {
		t.Fatalf("webhook never took effect on dry-run creates: %v", err)
	}

	var (
		directStats, apiStats loadStats
		servedSerial          atomic.Value // string: the serial the last direct handshake saw
		stopLoad              = make(chan struct{})
		wg                    sync.WaitGroup
	)
	for i := range 2 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				uid := types.UID(fmt.Sprintf("direct-%d-%d", i, n))
				resp, err := direct.Post(hookURL, "application/json", bytes.NewReader(reviewJSON(t, admissionV1, uid, []byte(`{"kind":"Deployment"}`), true)))
				if err != nil {
					directStats.fail("%s: %v", uid, err)
					continue
				}
				var review admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&review)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || review.Response == nil || !review.Response.Allowed || review.Response.UID != uid {
					directStats.fail("%s: status %d, decode %v, review %+v", uid, resp.StatusCode, err, review.Response)
					continue
				}
				servedSerial.Store(resp.TLS.PeerCertificates[0].SerialNumber.String())
				directStats.ok.Add(1)
			}
		})
	}
	dryRunCreate := func(stats *loadStats, name string) {
		got, err := kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			stats.fail("dry-run create %s: %v", name, err)
		case got.Annotations[admittedAnnotation] != "dry-run":
			stats.fail("dry-run create %s: annotations %v, want the webhook's", name, got.Annotations)
		default:
			stats.ok.Add(1)
		}
	}
	for i := range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				dryRunCreate(&apiStats, fmt.Sprintf("load-%d", i))
			}
		})
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopLoad)
			wg.Wait()
		}
	}
	defer stop()
	waitFor(t, "load before the rotation", func() bool { return directStats.ok.Load() >= 10 && apiStats.ok.Load() >= 10 })

	// Rotate: the clock catches up with the serving certificate's rotation
	// window.
	rotatedAt := time.Now()
	clockMu.Lock()
	clock = rotatedAt
	clockMu.Unlock()
	if err := reconciler.Reconcile(ctx, reconciler.Key()); err != nil {
		t.Fatalf("rotating reconcile: %v", err)
	}
	after := getSecret(t, kube, ns, secretName)
	for _, k := range []string{keys.CACert, keys.CAKey} {
		if !bytes.Equal(before.Data[k], after.Data[k]) {
			t.Errorf("serving rotation changed %s", k)
		}
	}
	newServing, err := certificates.ParseKeyPair(after.Data[keys.ServerCert], after.Data[keys.ServerKey])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before.Data[keys.ServerCert], after.Data[keys.ServerCert]) {
		t.Fatal("serving certificate was not rotated")
	}
	enqueueMu.Lock()
	if want := certificates.DefaultServingValidity - certificates.DefaultServingRotateBefore; lastEnqueue < want-time.Minute || lastEnqueue > want {
		t.Errorf("next run scheduled in %v, want about %v", lastEnqueue, want)
	}
	enqueueMu.Unlock()

	// The server picks the new certificate up from the informer, without a
	// restart.
	newSerial := newServing.Cert.SerialNumber.String()
	waitFor(t, "direct clients to see the new certificate", func() bool { return servedSerial.Load() == newSerial })
	directAtSwitch, apiAtSwitch := directStats.ok.Load(), apiStats.ok.Load()

	// A burst of slow admissions makes the kube-apiserver open connections,
	// which handshake with the new certificate.
	var burst loadStats
	var burstWG sync.WaitGroup
	for i := range 8 {
		burstWG.Go(func() { dryRunCreate(&burst, fmt.Sprintf("burst-%d", i)) })
	}
	burstWG.Wait()
	waitFor(t, "load after the rotation", func() bool {
		return directStats.ok.Load() >= directAtSwitch+10 && apiStats.ok.Load() >= apiAtSwitch+10
	})
	stop()

	for name, s := range map[string]*loadStats{"direct TLS client": &directStats, "kube-apiserver dry-run create": &apiStats, "kube-apiserver burst": &burst} {
		if len(s.failures) > 0 {
			t.Errorf("%s: %d failures (of %d successes), first: %s", name, len(s.failures), s.ok.Load(), s.failures[0])
		}
	}
	if burst.ok.Load() != 8 {
		t.Errorf("%d of 8 burst creates succeeded", burst.ok.Load())
	}
	if n := listener.since("127.0.0.1", rotatedAt); n == 0 {
		t.Errorf("the kube-apiserver opened no connection after the rotation; its handshakes with the new certificate are untested")
	}
	if entries := logs.All(); len(entries) > 0 {
		t.Errorf("server logged %d warnings or errors, first: %s %v", len(entries), entries[0].Message, entries[0].ContextMap())
	}
	t.Logf("direct admissions: %d, kube-apiserver dry-run creates: %d, kube-apiserver connections after rotation: %d",
		directStats.ok.Load(), apiStats.ok.Load()+burst.ok.Load(), listener.since("127.0.0.1", rotatedAt))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getSecret(t *testing.T, kube kubernetes.Interface, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := kube.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Secret %s/%s: %v", ns, name, err)
	}
	return s
}

func newDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"owner": "webhook-test"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}
