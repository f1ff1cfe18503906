package sharedmain

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
)

// childEnv makes the test binary, run again by
// TestMainWithContextExitsNonZeroWhenStartFails, play a knative-shaped main.
const childEnv = "BINDKIT_SHAREDMAIN_CHILD"

// TestMainWithContextExitsNonZeroWhenStartFails runs, in a child process,
// a main written for knative's MainWithContext, which returns nothing: it
// calls MainWithContext and then returns. Start-up fails (no system
// namespace); the child must exit 1 with the reason on stderr, not 0.
func TestMainWithContextExitsNonZeroWhenStartFails(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		ctx := WithLogOutput(context.Background(), os.Stdout)
		MainWithContext(ctx, "child", newDenierController("/deny"))
		return // a knative-shaped main ends here; the process would exit 0
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMainWithContextExitsNonZeroWhenStartFails$")
	cmd.Env = append(os.Environ(), childEnv+"=1", injection.SystemNamespaceEnv+"=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("child exited with %v, want exit status 1; stderr:\n%s", err, stderr.String())
	}
	if got := stderr.String(); !strings.Contains(got, "child: ") || !strings.Contains(got, "no system namespace") {
		t.Errorf("stderr = %q, want the component and the reason", got)
	}
}

// TestRunRejectsInvalidFlags: settings handed to Run through WithFlags are
// validated like a command line, before anything starts.
func TestRunRejectsInvalidFlags(t *testing.T) {
	ctx, _, _ := fakeContext(t, Flags{DisableHA: true, KubeAPIBurst: -3, ResyncPeriod: time.Millisecond})
	err := Run(ctx, "test", recordingController(&recorder{}))
	for _, want := range []string{"test: ", "--kube-api-burst -3", "--resync-period 1ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run error = %v, want one containing %q", err, want)
		}
	}
}

// countingRecorder counts the reconciles of each key.
type countingRecorder struct {
	mu    sync.Mutex
	count map[string]int
}

func (c *countingRecorder) Reconcile(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count == nil {
		c.count = map[string]int{}
	}
	c.count[key]++
	return nil
}

func (c *countingRecorder) times(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[key]
}

// TestResyncPeriodReachesTheInformers: with --resync-period 1s a ConfigMap
// nobody changes is reconciled again and again; the flag reaches the
// informers the constructors get.
func TestResyncPeriodReachesTheInformers(t *testing.T) {
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "quiet"}}
	ctx, _, _ := fakeContext(t, Flags{DisableHA: true, ResyncPeriod: time.Second}, seed)
	var rec countingRecorder
	ctor := func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		impl := controller.NewImpl(&rec, logging.FromContext(ctx), "resync")
		injection.KubeInformerFactory(ctx).Core().V1().ConfigMaps().Informer().
			AddEventHandler(controller.HandleAll(impl.Enqueue))
		return impl
	}
	_, stop := startProcess(t, ctx, ctor)
	poll(t, "three reconciles of an unchanged ConfigMap", func(context.Context) (bool, error) {
		return rec.times("apps/quiet") >= 3, nil
	})
	if err := stop(); err != nil {
		t.Fatalf("process returned %v, want nil", err)
	}
}

// drainWatcher is a leader-only reconciler whose reconcile of "ns/slow"
// lasts until released, and records whether its context was still live and
// itself still leader when it finished.
type drainWatcher struct {
	controller.LeaderAwareFuncs
	started, release chan struct{}
	once             sync.Once

	mu                  sync.Mutex
	finished            bool
	ctxErr              error
	leaderAtFinish      bool
	demotedBeforeFinish bool
}

func (d *drainWatcher) Reconcile(ctx context.Context, key string) error {
	if key != "ns/slow" || !d.IsLeader() {
		return nil
	}
	d.once.Do(func() { close(d.started) })
	<-d.release
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finished, d.ctxErr, d.leaderAtFinish = true, ctx.Err(), d.IsLeader()
	return nil
}

// TestShutdownDrainsBeforeLeadershipEnds: under leader election, a
// reconcile in flight when the process is told to stop finishes with a live
// context, still leader; only then is the process demoted.
func TestShutdownDrainsBeforeLeadershipEnds(t *testing.T) {
	ctx, _, logs := fakeContext(t, Flags{})
	d := &drainWatcher{started: make(chan struct{}), release: make(chan struct{})}
	d.DemoteFunc = func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.demotedBeforeFinish = !d.finished
	}
	ctor := func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		impl := controller.NewImpl(d, logging.FromContext(ctx), "drain")
		impl.EnqueueKey("ns/slow")
		return impl
	}
	p, stop := startProcess(t, ctx, ctor)
	poll(t, "promotion", func(context.Context) (bool, error) { return p.impls[0].IsLeader(), nil })
	<-d.started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	poll(t, "shutdown begins while the reconcile runs", func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), `"msg":"shutting down"`), nil
	})
	close(d.release)
	if err := <-stopped; err != nil {
		t.Fatalf("process returned %v, want nil", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.finished || d.ctxErr != nil || !d.leaderAtFinish {
		t.Errorf("in-flight reconcile: finished %v, context error %v, leader %v; want it finished, live and leader",
			d.finished, d.ctxErr, d.leaderAtFinish)
	}
	if d.demotedBeforeFinish {
		t.Error("demoted before the in-flight reconcile finished")
	}
	if p.impls[0].IsLeader() {
		t.Error("still leader after the process returned")
	}
}
