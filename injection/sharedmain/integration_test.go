package sharedmain

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/webhook"
)

// TestRunWithRealAPIServer runs the shared main against the real
// kube-apiserver, as a binary would: clients from a kubeconfig file, a
// controller of ConfigMaps in one namespace and an admission controller,
// without leader election.
func TestRunWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	start := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }
	systemNS := createNamespace(t, kube, "sharedmain-system-")
	appNS := createNamespace(t, kube, "sharedmain-app-")

	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	flags := onAnyPort(t, Flags{
		Kubeconfig: env.KubeconfigPath, DisableHA: true, WebhookAddress: "127.0.0.1",
		WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")}, WebhookGracePeriod: time.Second,
	})
	ctx = WithFlags(ctx, flags)
	ctx = injection.WithSystemNamespace(ctx, systemNS)
	ctx = WithLogLevel(ctx, level)
	ctx = WithLogOutput(ctx, logs)

	var rec recorder
	inAppNS := func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		impl := controller.NewImpl(&rec, logging.FromContext(ctx), "app-configmaps")
		injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
			FilterFunc: controller.FilterWithNamespace(appNS),
			Handler:    controller.HandleAll(impl.Enqueue),
		})
		return impl
	}
	// exited is closed, not sent on, so every wait below sees the return.
	var mainErr error
	exited := make(chan struct{})
	go func() {
		mainErr = Run(ctx, "it", inAppNS, newDenierController("/deny"))
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(time.Minute):
		}
		if t.Failed() {
			t.Logf("process logs:\n%s", logs.String())
		}
	})

	var secret *corev1.Secret
	poll(t, "certificates Secret appears", func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("Run returned early: %w", mainErr)
		default:
		}
		s, err := kube.CoreV1().Secrets(systemNS).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
		secret = s
		return err == nil, nil
	})
	step("secret")
	client := tlsClient(t, secret)
	webhookAddr := listenAddresses(t, flags).Webhook
	base := "https://" + webhookAddr
	poll(t, "/readyz answers 200 over TLS trusting the Secret's CA", func(ctx context.Context) (bool, error) {
		code, _ := get(ctx, client, base+webhook.ReadyzPath)
		return code == http.StatusOK, nil
	})
	step("ready")
	resp, err := admit(t.Context(), client, base+"/deny", appNS, "web")
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	if want := "denied " + appNS + "/web"; resp.Allowed || resp.Result == nil || resp.Result.Message != want {
		t.Errorf("admission = %+v, want denied with %q", resp, want)
	}

	createConfigMap(t, kube, appNS, "hello", nil)
	poll(t, "controller reconciles a ConfigMap", func(context.Context) (bool, error) { return rec.seen(appNS + "/hello"), nil })
	step("reconciled")
	if strings.Contains(logs.String(), `"level":"debug"`) {
		t.Fatal("debug lines logged at level info")
	}

	createConfigMap(t, kube, systemNS, ConfigLoggingName, map[string]string{LogLevelKey("it"): "debug"})
	poll(t, "log level follows config-logging", func(context.Context) (bool, error) { return level.Level() == zapcore.DebugLevel, nil })
	createConfigMap(t, kube, appNS, "after-debug", nil)
	poll(t, "a debug line about the next reconcile", func(context.Context) (bool, error) {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, `"level":"debug"`) && strings.Contains(line, appNS+"/after-debug") {
				return true, nil
			}
		}
		return false, nil
	})

	step("debug logged")
	client.Transport.(*http.Transport).CloseIdleConnections()
	cancel()
	select {
	case <-exited:
		if mainErr != nil {
			t.Fatalf("Run after cancel = %v, want nil", mainErr)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("Run did not return within 45s of cancellation")
	}
	step("returned")
	if conn, err := net.Dial("tcp", webhookAddr); err == nil {
		conn.Close()
		t.Errorf("webhook %s still accepts connections after Run returned", webhookAddr)
	}
}

func createNamespace(t testing.TB, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func createConfigMap(t *testing.T, kube kubernetes.Interface, namespace, name string, data map[string]string) {
	t.Helper()
	_, err := kube.CoreV1().ConfigMaps(namespace).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ConfigMap %s/%s: %v", namespace, name, err)
	}
}

// startupBinder is a reconciler wired as knative's walkthrough wires a
// BaseReconciler, field by field: LeaderAwareFuncs embedded with no
// PromoteFunc, and a Reconcile that does nothing as a follower. As leader
// it marks the ConfigMap it reconciles bound.
type startupBinder struct {
	controller.LeaderAwareFuncs
	kube kubernetes.Interface
}

func (b *startupBinder) Reconcile(ctx context.Context, key string) error {
	if !b.IsLeader() {
		return nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return controller.NewPermanentError(err)
	}
	_, err = b.kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"bindkit.dev/bound":"true"}}}`), metav1.PatchOptions{})
	return err
}

// TestObjectsThatExistAtStartUpAreReconciledWithRealAPIServer runs Run, as a
// binary would, over 200 objects that exist before the process starts,
// with a leader-only reconciler that has no PromoteFunc. Whether the
// process is promoted right after its workers start (--disable-ha) or
// through a Lease (workers reconcile, and skip, every object as a follower
// first), every object is reconciled by the leader.
func TestObjectsThatExistAtStartUpAreReconciledWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, disableHA := range []bool{true, false} {
		t.Run(fmt.Sprintf("disable-ha=%v", disableHA), func(t *testing.T) {
			systemNS := createNamespace(t, kube, "startup-system-")
			appNS := createNamespace(t, kube, "startup-app-")
			const n = 200
			for i := range n {
				createConfigMap(t, kube, appNS, fmt.Sprintf("b-%03d", i), nil)
			}

			logs := &syncBuffer{}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ctx = WithFlags(ctx, onAnyPort(t, Flags{Kubeconfig: env.KubeconfigPath, DisableHA: disableHA}))
			ctx = injection.WithSystemNamespace(ctx, systemNS)
			ctx = WithLogOutput(ctx, logs)
			ctor := func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
				r := &startupBinder{kube: injection.KubeClient(ctx)}
				impl := controller.NewImpl(r, logging.FromContext(ctx), "startup")
				injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
					FilterFunc: controller.FilterWithNamespace(appNS),
					Handler:    controller.HandleAll(impl.Enqueue),
				})
				return impl
			}
			var runErr error
			exited := make(chan struct{})
			go func() {
				runErr = Run(ctx, "startup", ctor)
				close(exited)
			}()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("process logs:\n%s", logs.String())
				}
			})

			poll(t, "every ConfigMap that existed at start-up bound", func(ctx context.Context) (bool, error) {
				select {
				case <-exited:
					return false, fmt.Errorf("Run returned early: %w", runErr)
				default:
				}
				list, err := kube.CoreV1().ConfigMaps(appNS).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, nil
				}
				bound := 0
				for _, cm := range list.Items {
					if cm.Annotations["bindkit.dev/bound"] == "true" {
						bound++
					}
				}
				return bound == n, nil
			})
			cancel()
			select {
			case <-exited:
				if runErr != nil {
					t.Errorf("Run = %v, want nil", runErr)
				}
			case <-time.After(45 * time.Second):
				t.Fatal("Run did not return within 45s of cancellation")
			}
			if !disableHA {
				// client-go's leader election logs through klog: its
				// lines are the process's JSON, not text on stderr.
				if !hasLogLine(logs.String(), "klog", "acquired lease") {
					t.Errorf("no klog line of leader election in the process's log:\n%s", logs.String())
				}
			}
		})
	}
}

// hasLogLine reports whether the JSON log lines of logs include one of
// logger whose message contains msg.
func hasLogLine(logs, logger, msg string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var entry struct {
			Logger string `json:"logger"`
			Msg    string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Logger == logger && strings.Contains(entry.Msg, msg) {
			return true
		}
	}
	return false
}
