package wiring_test

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"
)

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{"../config/300-githubbinding.yaml"}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

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
// wiring.New and sharedmain, as a process runs it.
func TestWithContextFailureIsReportedWithoutSubjectsWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	system := env.CreateNamespace(t, "system-")
	ns := env.CreateNamespace(t, "nosubjects-")
	var calls atomic.Int64
	binding, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		WithContext: func(ctx context.Context, b psbinding.Bindable) (context.Context, error) {
			if b.GetNamespace() == ns {
				calls.Add(1)
			}
			return nil, errors.New("the token this Binding names is not there")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = sharedmain.WithFlags(ctx, sharedmain.Flags{Kubeconfig: env.KubeconfigPath, DisableHA: true, ProbePort: sharedmain.AnyPort,
		WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")}, MetricsAddress: "127.0.0.1:0"})
	ctx = injection.WithSystemNamespace(ctx, system)
	ctx = sharedmain.WithLogOutput(ctx, zapcore.AddSync(logs))
	done := make(chan error, 1)
	go func() { done <- sharedmain.Run(ctx, "githubbinding-controller", binding.Controller) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sharedmain.Run: %v", err)
		}
	}()

	gh := &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lonely"},
		Spec: v1alpha1.GithubBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nothing"}}},
		},
	}
	gh.Spec.Secret.Name = "gh-token"
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gh)
	if err != nil {
		t.Fatal(err)
	}
	bindings := dynamic.NewForConfigOrDie(env.Config).Resource(binding.GVR).Namespace(ns)
	if _, err := bindings.Create(t.Context(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := bindings.Get(ctx, "lonely", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Ready" {
				ready = c
			}
		}
		return ready != nil && ready["status"] == "False" && ready["reason"] == psbinding.ReasonContextFailed, nil
	})
	if err != nil {
		t.Fatalf("waiting until Ready is False with %s: %v (last Ready: %v)", psbinding.ReasonContextFailed, err, ready)
	}
	if msg, _ := ready["message"].(string); !strings.Contains(msg, "the token this Binding names is not there") {
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
