package sharedmain

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/webhook"
)

const testNamespace = "bindkit-system"

// fakeContext returns a context that makes the process run on fake clients
// in testNamespace, with flags, and logs into the returned buffer.
func fakeContext(t *testing.T, flags Flags, objects ...kruntime.Object) (context.Context, *injectiontest.Fakes, *syncBuffer) {
	t.Helper()
	_, fakes := injectiontest.NewContext(t, objects...)
	logs := &syncBuffer{}
	// Metrics on, as by default; every listener on a port the kernel
	// picks: tests run side by side.
	ctx := WithFlags(t.Context(), onAnyPort(t, flags))
	ctx = injection.WithSystemNamespace(ctx, testNamespace)
	ctx = WithLogOutput(ctx, logs)
	ctx = context.WithValue(ctx, clientsKey{}, newInjectionFunc(func(ctx context.Context, opts injection.Options) (context.Context, *injection.InformerSet, error) {
		return injection.NewWithClients(ctx, injection.Clients{Kube: fakes.Kube, Dynamic: fakes.Dynamic, Metadata: injectiontest.MetadataFromDynamic(fakes.Dynamic), RESTMapper: fakes.RESTMapper}, opts)
	}))
	return ctx, fakes, logs
}

// startProcess runs the process until the returned stop is called, which
// reports what the process returned. It fails t if start-up fails.
func startProcess(t *testing.T, ctx context.Context, ctors ...Constructor) (*process, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	p := newProcess(ctx, "test")
	errc := make(chan error, 1)
	go func() { errc <- p.main(ctx, ctors) }()
	var result error
	stopped := false
	stop := func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-errc:
		case <-time.After(time.Minute):
			result = fmt.Errorf("process did not return within a minute of cancellation")
		}
		return result
	}
	t.Cleanup(func() { stop() })
	select {
	case <-p.started:
	case err := <-errc:
		t.Fatalf("start-up failed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("process did not start within 30s")
	}
	return p, stop
}

func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 20*time.Second, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func recordingController(r *recorder) Constructor {
	return func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		impl := controller.NewImpl(r, logging.FromContext(ctx), "recorder")
		injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps().Informer().
			AddEventHandler(controller.HandleAll(impl.Enqueue))
		return impl
	}
}

func TestDisableHAPromotesEverythingAndRoutesAdmission(t *testing.T) {
	flags := Flags{
		DisableHA: true, WebhookAddress: "127.0.0.1",
		WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")}, WebhookGracePeriod: -1,
	}
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "settings"}}
	ctx, fakes, _ := fakeContext(t, flags, seed)
	var rec recorder
	p, stop := startProcess(t, ctx, recordingController(&rec), newDenierController("/deny"), newDenierController("/deny-too"))
	addrs := listenAddresses(t, p.flags)
	if addrs.Probes != "" {
		t.Errorf("probes reported at %s by a process whose webhook serves them", addrs.Probes)
	}

	var leaders []string
	for _, impl := range append(p.impls, p.certs) {
		if impl.IsLeader() {
			leaders = append(leaders, impl.Name())
		}
	}
	want := []string{"recorder", "denier/deny", "denier/deny-too", CertificatesControllerName}
	if diff := cmp.Diff(want, leaders); diff != "" {
		t.Errorf("Impls promoted under DisableHA (-want +got):\n%s", diff)
	}
	poll(t, "recorder reconciles the seeded ConfigMap", func(context.Context) (bool, error) { return rec.seen("apps/settings"), nil })

	var secret *corev1.Secret
	poll(t, "certificates Secret is created", func(ctx context.Context) (bool, error) {
		s, err := fakes.Kube.CoreV1().Secrets(testNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
		secret = s
		return err == nil, nil
	})
	client := tlsClient(t, secret)
	base := "https://" + addrs.Webhook
	poll(t, "webhook /readyz answers 200", func(ctx context.Context) (bool, error) {
		code, _ := get(ctx, client, base+webhook.ReadyzPath)
		return code == http.StatusOK, nil
	})
	for _, path := range []string{"/deny", "/deny-too"} {
		resp, err := admit(t.Context(), client, base+path, "apps", "web")
		if err != nil {
			t.Fatalf("admit at %s: %v", path, err)
		}
		if resp.Allowed || resp.Result == nil || resp.Result.Message != "denied apps/web" {
			t.Errorf("admission at %s = %+v, want denied with message %q", path, resp, "denied apps/web")
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("process returned %v after cancellation, want nil", err)
	}
	leases, err := fakes.Kube.CoordinationV1().Leases(testNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("leases under DisableHA = %d, want none", len(leases.Items))
	}
	if _, err := net.Dial("tcp", addrs.Webhook); err == nil {
		t.Errorf("webhook %s still accepts connections after shutdown", addrs.Webhook)
	}
}

func TestLeaderElectionPromotesAfterTheLease(t *testing.T) {
	ctx, fakes, _ := fakeContext(t, Flags{})
	var rec recorder
	p, stop := startProcess(t, ctx, recordingController(&rec))
	addrs := listenAddresses(t, p.flags)
	if addrs.Webhook != "" {
		t.Errorf("webhook reported at %s by a process without admission controllers", addrs.Webhook)
	}
	if p.certs != nil {
		t.Error("a certificates controller runs without any admission controller")
	}
	poll(t, "controller promoted through the lease", func(context.Context) (bool, error) { return p.impls[0].IsLeader(), nil })
	lease, err := fakes.Kube.CoordinationV1().Leases(testNamespace).Get(t.Context(), "test", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease %s/test: %v", testNamespace, err)
	}
	if holder := lease.Spec.HolderIdentity; holder == nil || *holder == "" {
		t.Errorf("lease %s/test has no holder", testNamespace)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + addrs.Probes
	for _, path := range []string{webhook.HealthzPath, webhook.ReadyzPath} {
		code, err := get(t.Context(), client, base+path)
		if err != nil || code != http.StatusOK {
			t.Errorf("GET %s = %d, %v; want 200", path, code, err)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("process returned %v after cancellation, want nil", err)
	}
	if p.impls[0].IsLeader() {
		t.Error("controller still leader after shutdown")
	}
}

func TestStartupErrors(t *testing.T) {
	panics := func(context.Context, configmap.Watcher) *controller.Impl { panic("no widgets informer") }
	returnsNil := func(context.Context, configmap.Watcher) *controller.Impl { return nil }
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	webhookOn := func(port int) Flags {
		return Flags{DisableHA: true, WebhookAddress: "127.0.0.1", WebhookPort: port, WebhookGracePeriod: -1}
	}

	tests := []struct {
		name      string
		flags     Flags
		noNS      bool
		ctors     []Constructor
		wantError string
	}{
		{name: "constructor panics", ctors: []Constructor{panics}, wantError: "test: controller constructor 0: panic: no widgets informer"},
		{name: "constructor returns nil", ctors: []Constructor{newDenierController("/a"), returnsNil}, wantError: "test: controller constructor 1: returned a nil Impl"},
		{name: "nil constructor", ctors: []Constructor{nil}, wantError: "test: controller constructor 0: nil Constructor"},
		{name: "no system namespace", noNS: true, wantError: "no system namespace"},
		{name: "webhook port taken", flags: webhookOn(takenPort), ctors: []Constructor{newDenierController("/a")}, wantError: "webhook: listen on 127.0.0.1:"},
		{name: "probe port taken", flags: Flags{DisableHA: true, ProbePort: takenPort}, wantError: "probes: listen on :"},
		{name: "metrics port taken", flags: Flags{DisableHA: true, MetricsAddress: fmt.Sprintf("127.0.0.1:%d", takenPort)}, wantError: "metrics: listen on 127.0.0.1:"},
		{name: "two admission controllers on one path", flags: webhookOn(AnyPort), ctors: []Constructor{newDenierController("/a"), newDenierController("/a")}, wantError: "both serve path /a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, _, _ := fakeContext(t, tt.flags)
			if tt.noNS {
				t.Setenv(injection.SystemNamespaceEnv, "")
				ctx = injection.WithSystemNamespace(ctx, "")
			}
			done := make(chan error, 1)
			go func() { done <- newProcess(ctx, "test").main(ctx, tt.ctors) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Errorf("error = %v, want one containing %q", err, tt.wantError)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("start-up error not returned within 30s")
			}
		})
	}
}

// TestNothingOutlivesTheProcess checks that every goroutine the process
// started (informers, the ConfigMap watcher, workers, the elector, the
// servers) has ended when it returns. It is not parallel, so other tests'
// goroutines can only end while it runs.
func TestNothingOutlivesTheProcess(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags func(t *testing.T) Flags
		ctors []Constructor
	}{
		{
			name: "webhook without leader election",
			flags: func(t *testing.T) Flags {
				return Flags{DisableHA: true, WebhookAddress: "127.0.0.1",
					WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")}, WebhookGracePeriod: -1}
			},
			ctors: []Constructor{newDenierController("/deny")},
		},
		{
			name:  "controllers with leader election",
			flags: func(t *testing.T) Flags { return Flags{} },
			ctors: []Constructor{recordingController(&recorder{})},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, fakes, _ := fakeContext(t, tt.flags(t))
			baseline := runtime.NumGoroutine()
			p, stop := startProcess(t, ctx, tt.ctors...)
			poll(t, "promotion", func(context.Context) (bool, error) { return p.impls[0].IsLeader(), nil })
			if p.certs != nil {
				poll(t, "certificates Secret", func(ctx context.Context) (bool, error) {
					_, err := fakes.Kube.CoreV1().Secrets(testNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
					return err == nil, nil
				})
			}
			if err := stop(); err != nil {
				t.Fatalf("process returned %v, want nil", err)
			}
			poll(t, "goroutines back to the baseline", func(context.Context) (bool, error) {
				return runtime.NumGoroutine() <= baseline, nil
			})
		})
	}
}

// A component that fails while running (here an Impl run twice, because two
// constructors returned it) shuts the process down with its error, without
// waiting for ctx.
func TestRuntimeFailureStopsTheProcess(t *testing.T) {
	ctx, _, _ := fakeContext(t, Flags{DisableHA: true})
	shared := controller.NewImpl(&recorder{}, nil, "shared")
	same := func(context.Context, configmap.Watcher) *controller.Impl { return shared }
	done := make(chan error, 1)
	go func() { done <- newProcess(ctx, "test").main(ctx, []Constructor{same, same}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "controller shared: Run called more than once") {
			t.Errorf("error = %v, want the second Run's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("process still running 30s after a component failed")
	}
}
