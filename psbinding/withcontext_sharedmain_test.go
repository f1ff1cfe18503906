package psbinding

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/internal/testenv"
)

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

// A Binding whose WithContext fails is not Ready, with the reason, even
// when it selects no subject; WithContext runs once per reconcile. Through
// sharedmain, as a process runs it.
func TestWithContextFailureIsReportedWithoutSubjectsWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	system := env.CreateNamespace(t, "system-")
	ns := env.CreateNamespace(t, "nosubjects-")
	var calls atomic.Int64
	ctor := func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		inf := injection.TypedInformerFor[envBinding](ctx, envBindingsGVR)
		lister := inf.Lister()
		r := &BaseReconciler{
			GVR: envBindingsGVR,
			Get: func(namespace, name string) (Bindable, error) { return lister.Get(namespace, name) },
			WithContext: func(ctx context.Context, b Bindable) (context.Context, error) {
				if b.GetNamespace() == ns {
					calls.Add(1)
				}
				return nil, errors.New("the token this Binding names is not there")
			},
		}
		listAll := func() ([]Bindable, error) {
			all, err := lister.List(labels.Everything())
			out := make([]Bindable, len(all))
			for i, b := range all {
				out[i] = b
			}
			return out, err
		}
		return NewReconcilerImpl(ctx, "envbindings", r, inf.Informer(), listAll)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = sharedmain.WithFlags(ctx, sharedmain.Flags{Kubeconfig: env.KubeconfigPath, DisableHA: true, ProbePort: port,
		WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")}, MetricsAddress: "127.0.0.1:0"})
	ctx = injection.WithSystemNamespace(ctx, system)
	ctx = sharedmain.WithLogOutput(ctx, zapcore.AddSync(logs))
	done := make(chan error, 1)
	go func() { done <- sharedmain.Run(ctx, "envbinding-controller", ctor) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sharedmain.Run: %v", err)
		}
	}()

	b := newEnvBinding(ns, "lonely", deploymentRef(ns, "", matchLabels("app", "nothing")), "TOKEN", "t")
	if _, err := dynamic.NewForConfigOrDie(env.Config).Resource(envBindingsGVR).Namespace(ns).Create(context.Background(), toUnstructured(t, b), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &harness{ns: ns, dyn: dynamic.NewForConfigOrDie(env.Config)}
	got := h.waitReady(t, "lonely", readyCondition{"False", ReasonContextFailed})
	if msg := readyOf(got).Message; !strings.Contains(msg, "the token this Binding names is not there") {
		t.Errorf("Ready message %q does not say why", msg)
	}
	// Let a few retries happen, then compare: one call per reconcile.
	time.Sleep(2 * time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("sharedmain.Run: %v", err)
	}
	done <- nil // for the deferred wait
	reconciles := logs.count(`"key":"`+ns+`/lonely"`, "reconcile failed")
	if n := calls.Load(); n == 0 || int(n) != reconciles {
		t.Errorf("WithContext called %d times for %d reconciles, want one per reconcile", n, reconciles)
	}
}
