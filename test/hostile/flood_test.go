package hostile_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/scrape"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/webhook"
)

// The flood: floodPeers connections from floodAddresses loopback
// addresses (the first the kube-apiserver's own, 127.0.0.1), each held
// without finishing a request in one of floodKinds' ways and opened again,
// after floodPause, whenever the webhook cuts it, for floodDuration.
const (
	floodPeers     = 10000
	floodAddresses = 20
	floodDuration  = 60 * time.Second
	floodPause     = 2 * time.Second
	// floodTrickle is how often a trickling peer sends its next bytes.
	floodTrickle = 2 * time.Second
	// floodCreators create Deployments through the kube-apiserver at once.
	floodCreators = 4
)

// floodKind is one way to hold a connection without finishing a request.
type floodKind struct {
	name string
	// tls: the peer completes a TLS handshake before sending head.
	tls bool
	// head is sent once; trickle every floodTrickle after.
	head, trickle string
}

var floodKinds = []floodKind{
	{name: "handshake never finished", head: "\x16\x03\x01\x02\x00\x01"},
	{name: "idle TLS", tls: true},
	{name: "slow headers", tls: true, head: "POST /githubbindings HTTP/1.1\r\nHost: x\r\n", trickle: "X-A: b\r\n"},
	{name: "slow body", tls: true, head: "POST /githubbindings?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 102400\r\n\r\n{", trickle: " "},
}

// TestSlowPeerFloodWithRealAPIServer floods the example controller's
// webhook, running with default flags, with connections that stall at
// every stage of a request, while the kube-apiserver creates Deployments
// bound by the webhook (failurePolicy Fail): every create must succeed
// bound, and the process's memory, file descriptors and goroutines stay
// within bounds and return to rest once the flood stops.
func TestSlowPeerFloodWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	c := startController(t, env, nil)
	runFlood(t, env, c, "flood")
}

// TestSlowPeerFloodWithClientAuthWithRealAPIServer is the flood with
// --webhook-client-ca set: no peer but the kube-apiserver completes a
// handshake, and the kube-apiserver's connections outrank every
// handshake still under way.
func TestSlowPeerFloodWithClientAuthWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	probe := func(c *controller) error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", c.probePort, webhook.ReadyzPath))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}
	c := startController(t, env, probe, "--webhook-client-ca="+env.WebhookClientCAFile)
	runFlood(t, env, c, "flood-authed")
}

// runFlood binds Deployments labelled app=<app>, measures their creates
// before and during the flood, and checks the webhook's resources.
func runFlood(t *testing.T, env *testenv.Environment, c *controller, app string) {
	raiseFileLimit(t, floodPeers+1000)
	createSelectorBinding(t, env, app)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	creates := &creator{t: t, kube: kube, app: app}
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return creates.once() == nil, nil
	}); err != nil {
		t.Fatalf("a Deployment was never created bound: %v\n%s", creates.once(), c.logTail())
	}
	before := creates.run(10*time.Second, nil)
	time.Sleep(time.Second)
	res := c.resources()
	c.resetPeak()
	t.Logf("at rest: %s", res)

	f := &flood{port: c.port}
	ctx, cancel := context.WithTimeout(t.Context(), floodDuration+10*time.Second)
	defer cancel()
	stopped := f.start(ctx)
	time.Sleep(5 * time.Second) // the flood ramps up
	var peak resources
	during := creates.run(floodDuration-5*time.Second, func() {
		now := c.resources()
		peak = peak.max(now)
	})
	cancel()
	stopped.Wait()
	_, peakRSS := c.memory()

	t.Logf("kube-apiserver creates before the flood: %s", before)
	t.Logf("kube-apiserver creates during the flood: %s", during)
	t.Logf("flood: %d peers from %d addresses, %s", floodPeers, floodAddresses, f)
	t.Logf("webhook at the flood's peak: %s, memory peak %d MiB (+%d MiB over rest)", peak, peakRSS>>20, (peakRSS-res.rss)>>20)
	if before.failed+during.failed > 0 {
		t.Errorf("%d of %d creates failed or came back unbound", before.failed+during.failed, before.n+during.n)
	}
	if during.n == 0 {
		t.Error("no create completed during the flood")
	}
	if growth := peakRSS - res.rss; growth > memoryBound {
		t.Errorf("the webhook grew %d MiB over rest under the flood, more than %d MiB", growth>>20, memoryBound>>20)
	}
	maxConns := webhook.DefaultMaxConnections
	if peak.fds > res.fds+maxConns+64 {
		t.Errorf("the webhook held %d file descriptors, more than %d at rest + %d connections + 64", peak.fds, res.fds, maxConns)
	}
	if peak.goroutines > res.goroutines+2*maxConns {
		t.Errorf("the webhook ran %d goroutines, more than %d at rest + 2 per connection", peak.goroutines, res.goroutines)
	}
	// Nothing leaks once the peers are gone.
	var after resources
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		after = c.resources()
		return after.fds <= res.fds+8 && after.goroutines <= res.goroutines+16, nil
	}); err != nil {
		t.Errorf("30s after the flood: %s, at rest %s", after, res)
	}
	t.Logf("after the flood: %s", after)
	if err := c.exited(); err != nil {
		t.Fatal(err)
	}
	c.checkLog()
	auditTestNamespace(t, env)
}

// raiseFileLimit makes sure this process may hold n files.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Fatalf("the flood needs %d file descriptors; the hard limit (ulimit -Hn) is %d", n, lim.Max)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("raise the file limit to %d: %v", n, err)
	}
}

// createSelectorBinding binds the Deployments labelled app=app in
// testNamespace.
func createSelectorBinding(t *testing.T, env *testenv.Environment, app string) {
	t.Helper()
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": githubBindings.GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"namespace": testNamespace, "name": app},
		"spec": map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": app}}},
			"secret":  map[string]any{"name": "github-token"},
		},
	}}
	res := dynamic.NewForConfigOrDie(env.Config).Resource(githubBindings).Namespace(testNamespace)
	if _, err := res.Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Binding stays (deleting it would unbind its subjects while the
	// next test measures); its subjects go, so the next controller has
	// none to look at.
	t.Cleanup(func() {
		kubernetes.NewForConfigOrDie(env.Config).AppsV1().Deployments(testNamespace).DeleteCollection(context.Background(),
			metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=" + app})
	})
}

// creator creates Deployments labelled app=app through the
// kube-apiserver, each of which the webhook must bind.
type creator struct {
	t    *testing.T
	kube kubernetes.Interface
	app  string
	n    atomic.Int64
}

func (c *creator) once() error {
	name := fmt.Sprintf("%s-%d", c.app, c.n.Add(1))
	labels := map[string]string{"app": c.app}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
	got, err := c.kube.AppsV1().Deployments(testNamespace).Create(c.t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(got.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "github-token" }) {
		return fmt.Errorf("deployment %s created unbound", name)
	}
	return nil
}

// latencies are the outcomes of creates.
type latencies struct {
	n, failed int
	took      []time.Duration
	firstErr  error
}

func (l latencies) String() string {
	if len(l.took) == 0 {
		return fmt.Sprintf("%d creates, %d failed (%v)", l.n, l.failed, l.firstErr)
	}
	s := slices.Clone(l.took)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Millisecond) }
	out := fmt.Sprintf("%d creates, %d failed, p50 %v, p99 %v, max %v", l.n, l.failed, q(0.5), q(0.99), s[len(s)-1].Round(time.Millisecond))
	if l.firstErr != nil {
		out += fmt.Sprintf(" (first failure: %v)", l.firstErr)
	}
	return out
}

// run creates with floodCreators workers for d, calling sample once a
// second meanwhile.
func (c *creator) run(d time.Duration, sample func()) latencies {
	var (
		mu  sync.Mutex
		out latencies
		wg  sync.WaitGroup
	)
	end := time.Now().Add(d)
	for range floodCreators {
		wg.Go(func() {
			for time.Now().Before(end) && c.t.Context().Err() == nil {
				start := time.Now()
				err := c.once()
				took := time.Since(start)
				mu.Lock()
				out.n++
				if err != nil {
					out.failed++
					if out.firstErr == nil {
						out.firstErr = err
					}
				} else {
					out.took = append(out.took, took)
				}
				mu.Unlock()
			}
		})
	}
	if sample != nil {
		for time.Now().Before(end) {
			sample()
			time.Sleep(time.Second)
		}
	}
	wg.Wait()
	return out
}

// resources are what the webhook process holds.
type resources struct {
	rss             int64
	fds, goroutines int
}

func (r resources) String() string {
	return fmt.Sprintf("%d file descriptors, %d goroutines, %d MiB resident", r.fds, r.goroutines, r.rss>>20)
}

func (r resources) max(o resources) resources {
	return resources{rss: max(r.rss, o.rss), fds: max(r.fds, o.fds), goroutines: max(r.goroutines, o.goroutines)}
}

// resources reads the process's open files and resident memory from
// /proc, and its goroutines from its metrics.
func (c *controller) resources() resources {
	var r resources
	r.rss, _ = c.memory()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.pid()))
	if err != nil {
		c.t.Fatal(err)
	}
	r.fds = len(fds)
	// Scraped as Prometheus does, over HTTPS with a token.
	f, err := scrape.GetWithToken(context.Background(), "https://"+c.metrics+sharedmain.MetricsPath, c.metricsToken)
	if err != nil {
		c.t.Errorf("metrics: %v", err)
		return r
	}
	r.goroutines = int(f.Sum("go_goroutines", nil))
	return r
}

// flood holds floodPeers connections to the webhook on port.
type flood struct {
	port int
	// Counters, for the log.
	dials, failed, cut, open, peakOpen atomic.Int64
	started                            time.Time
}

func (f *flood) String() string {
	secs := time.Since(f.started).Seconds()
	return fmt.Sprintf("%d connections opened (%.0f/s), %d refused or failed, %d cut by the webhook, at most %d open at once",
		f.dials.Load(), float64(f.dials.Load())/secs, f.failed.Load(), f.cut.Load(), f.peakOpen.Load())
}

// start opens the flood's connections, ramping up over five seconds,
// until ctx ends; the WaitGroup is done when every one is closed.
func (f *flood) start(ctx context.Context) *sync.WaitGroup {
	f.started = time.Now()
	var wg sync.WaitGroup
	for i := range floodPeers {
		kind := floodKinds[i%len(floodKinds)]
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%floodAddresses))}
		delay := time.Duration(i) * 5 * time.Second / floodPeers
		wg.Go(func() {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			for ctx.Err() == nil {
				f.hold(ctx, kind, local)
				select {
				case <-time.After(floodPause/2 + rand.N(floodPause)):
				case <-ctx.Done():
				}
			}
		})
	}
	return &wg
}

// hold opens one connection of kind from local and holds it until the
// webhook closes it or ctx ends.
func (f *flood) hold(ctx context.Context, kind floodKind, local *net.TCPAddr) {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: local}
	raw, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", f.port))
	if err != nil {
		f.failed.Add(1)
		return
	}
	f.dials.Add(1)
	conn := raw
	defer func() { conn.Close() }()
	if kind.tls {
		tc := tls.Client(raw, &tls.Config{ServerName: "127.0.0.1", InsecureSkipVerify: true})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.HandshakeContext(ctx); err != nil {
			f.failed.Add(1)
			return
		}
		tc.SetDeadline(time.Time{})
		conn = tc
	}
	if n := f.open.Add(1); n > f.peakOpen.Load() {
		f.peakOpen.Store(n) // racy maximum: good enough for a log line
	}
	defer f.open.Add(-1)
	if kind.head != "" {
		io.WriteString(conn, kind.head)
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	one := make([]byte, 512)
	for ctx.Err() == nil {
		conn.SetReadDeadline(time.Now().Add(floodTrickle))
		if _, err := conn.Read(one); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				if kind.trickle != "" {
					io.WriteString(conn, kind.trickle)
				}
				continue
			}
			if ctx.Err() == nil {
				f.cut.Add(1)
			}
			return
		}
		// An answer (a 408, say) arrived; the webhook closes after it.
	}
}
