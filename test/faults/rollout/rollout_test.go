package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/apiproxy"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/rollout"
	"github.com/bindkit/bindkit/test/testenv"
)

// controlPlane runs workloads (kube-scheduler, kwok nodes, the workload
// controllers) and serves the SinkBinding CRD.
var controlPlane = testenv.Shared{Options: testenv.Options{
	Workloads: true,
	CRDPaths:  []string{"../../../examples/sinkbinding/config/300-sinkbinding.yaml"},
}}

func TestMain(m *testing.M) {
	rollout.RepoRoot = "../../.."
	controlPlane.Main(m)
}

// The fault matrix's rollout: subjects Deployments, maxChanging at a time,
// a forwarder sidecar that never becomes Ready (so the first wave fails
// its deadline and the rollout halts and rolls back).
const (
	subjects    = 8
	maxChanging = 3
	deadline    = "10s"
)

// When a fault strikes, counted in the requests the leader sends.
const (
	afterFirstPatch  = "after the first patch of a wave"
	afterLastPatch   = "after the last patch of a wave"
	beforeStatus     = "before the status write"
	afterStatus      = "after the status write"
	midRollback      = "in the middle of a rollback"
	faultKill        = "killed"
	faultLeaseRefuse = "lease renewal refused"
)

// TestRolloutFaultMatrixWithRealAPIServer runs, for each step of a wave
// (after its first patch, after its last, before and after the status
// write that reports it, in the middle of the rollback of a halted wave),
// a leader that is killed there, and one whose lease renewals are refused
// from there (a second replica takes over), on a rollout whose sidecar
// never becomes Ready. After each: never more than maxChanging subjects
// changed and not rolled out at once (sampled every 100 ms), every subject
// ever patched is named in the halt and rolled back (none carries the
// sidecar), no subject was patched twice for the generation, the
// Binding's records audit clean, and deleting the Binding leaves no
// record. Each cell's figures are logged.
func TestRolloutFaultMatrixWithRealAPIServer(t *testing.T) {
	for _, fault := range []string{faultKill, faultLeaseRefuse} {
		for _, at := range []string{afterFirstPatch, afterLastPatch, beforeStatus, afterStatus, midRollback} {
			t.Run(fault+" "+at, func(t *testing.T) { runCell(t, fault, at) })
		}
	}
}

// cell is one run of the matrix.
type cell struct {
	t     *testing.T
	env   *testenv.Environment
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	ns    string
	uid   atomic.Value // string: the Binding's, once created (the proxies read it)
	fired chan struct{}
	once  sync.Once

	mu      sync.Mutex
	patches map[string]int // paced patches of the generation, per subject, by any leader
	waves   int            // paced patches seen by the first leader
}

func runCell(t *testing.T, fault, at string) {
	env := controlPlane.Env(t)
	c := &cell{t: t, env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config),
		fired: make(chan struct{}), patches: map[string]int{}}
	c.ns = env.CreateNamespace(t, "fault-")
	rollout.CreateDeployments(t, c.kube, c.ns, subjects, 1)
	rollout.Poll(t, 2*time.Minute, "the Deployments to roll out", func() string { return c.notRolledOut(false) })
	before := c.generations()

	first := apiproxy.Start(t, env.Config, t.TempDir())
	first.Add(&apiproxy.Rule{Match: c.isPacedPatch, After: func(r apiproxy.Request, status int) { c.countPatch(r, status, true) }})
	leader := rollout.StartController(t, env, "--kubeconfig="+first.Kubeconfig)
	rollout.Poll(t, time.Minute, "the first replica to lead", func() string {
		return map[bool]string{true: "", false: "not leading yet"}[strings.Contains(leader.Log(), "became leader")]
	})
	var second *apiproxy.Proxy
	if fault == faultLeaseRefuse {
		// The replica that takes over, a follower until then.
		second = apiproxy.Start(t, env.Config, t.TempDir())
		second.Add(&apiproxy.Rule{Match: c.isPacedPatch, After: func(r apiproxy.Request, status int) { c.countPatch(r, status, false) }})
		rollout.StartController(t, env, "--kubeconfig="+second.Kubeconfig)
	}
	c.arm(first, fault, at, leader)

	maxSeen := c.sample()
	b := rollout.SinkBinding(c.ns, "sink", map[string]any{"app": "web"}, "https://sink.example.com/fault", envtest.FailingImage, map[string]any{
		psbinding.RolloutMaxChangingAnnotation: fmt.Sprint(maxChanging), psbinding.RolloutDeadlineAnnotation: deadline, psbinding.RolloutRollbackAnnotation: "true"})
	created, err := c.dyn.Resource(rollout.SinkBindings).Namespace(c.ns).Create(t.Context(), b, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.uid.Store(string(created.GetUID()))
	select {
	case <-c.fired:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the fault %q never struck", at)
	}
	struck := time.Now()
	if fault == faultKill {
		leader.Kill()
		restarted := apiproxy.Start(t, env.Config, t.TempDir())
		restarted.Add(&apiproxy.Rule{Match: c.isPacedPatch, After: func(r apiproxy.Request, status int) { c.countPatch(r, status, false) }})
		rollout.StartController(t, env, "--kubeconfig="+restarted.Kubeconfig)
	}
	halted := c.waitHaltedAndRolledBack()
	c.check(halted, before, maxSeen())
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: c.ns})
	t.Logf("%s %s: struck %v after the Binding's creation; halted and rolled back %v later; halted %v; at most %d changing at once; paced patches %v",
		fault, at, struck.Sub(created.GetCreationTimestamp().Time).Round(time.Second), time.Since(struck).Round(time.Second), halted, maxSeen(), c.patchCounts())

	// Records die with their owner.
	if err := c.dyn.Resource(rollout.SinkBindings).Namespace(c.ns).Delete(t.Context(), "sink", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rollout.Poll(t, time.Minute, "the Binding to go and leave no record", func() string {
		if _, err := c.dyn.Resource(rollout.SinkBindings).Namespace(c.ns).Get(t.Context(), "sink", metav1.GetOptions{}); err == nil {
			return "the Binding is still there"
		}
		return c.recordsLeft()
	})
}

// arm adds to the leader's proxy the rule that strikes at, with fault.
func (c *cell) arm(p *apiproxy.Proxy, fault, at string, leader *demo.Controller) {
	strike := func() {
		c.once.Do(func() {
			if fault == faultLeaseRefuse {
				// From now on the leader cannot renew: it stops leading
				// after its renew deadline, the follower takes over once
				// the lease has expired.
				p.Add(&apiproxy.Rule{Match: func(r apiproxy.Request) bool { return r.Is("PUT", "/leases/") }, Refuse: 503})
			}
			close(c.fired)
		})
	}
	status := func(r apiproxy.Request) bool {
		return r.Is("PUT", "/sinkbindings/sink/status") && strings.Contains(string(r.Body), `"wave":1`)
	}
	switch at {
	case afterFirstPatch:
		p.Add(&apiproxy.Rule{Match: c.isPacedPatch, After: func(apiproxy.Request, int) { strike() }})
	case afterLastPatch:
		p.Add(&apiproxy.Rule{Match: c.isPacedPatch, After: func(apiproxy.Request, int) {
			c.mu.Lock()
			n := c.waves
			c.mu.Unlock()
			if n >= maxChanging {
				strike()
			}
		}})
	case beforeStatus:
		// The write of the report of wave 1 never lands: the leader is
		// killed (or loses its lease) before it is sent. A lease lost is
		// seen after the renew deadline: the write waits longer than that,
		// and the leader's cancelled reconcile takes it back.
		rule := &apiproxy.Rule{Match: status, Before: func(apiproxy.Request) { strike() }}
		if fault == faultKill {
			rule.Refuse = 503
		} else {
			rule.Delay = 12 * time.Second
		}
		p.Add(rule)
	case afterStatus:
		p.Add(&apiproxy.Rule{Match: status, After: func(_ apiproxy.Request, code int) {
			if code == 200 {
				strike()
			}
		}})
	case midRollback:
		p.Add(&apiproxy.Rule{Match: func(r apiproxy.Request) bool {
			return r.Is("PATCH", "/deployments/") && strings.Contains(string(r.Body), "bindings.bindkit.dev~1held")
		}, After: func(apiproxy.Request, int) { strike() }})
	}
}

// isPacedPatch: a patch of a Deployment that records a paced change of
// the Binding (duck.RolloutAnnotation).
func (c *cell) isPacedPatch(r apiproxy.Request) bool {
	return r.Is("PATCH", "/deployments/") && c.pacedGeneration(r) > 0
}

// pacedGeneration is the generation of the Binding a patch records a
// paced change to, 0 for none.
func (c *cell) pacedGeneration(r apiproxy.Request) int64 {
	var ops []map[string]any
	if json.Unmarshal(r.Body, &ops) != nil {
		return 0
	}
	for _, op := range ops {
		v, _ := op["value"].(string)
		if path, _ := op["path"].(string); (op["op"] == "add" || op["op"] == "replace") && strings.HasSuffix(path, "bindings.bindkit.dev~1rollout") {
			changes, _ := duck.ParseChanges(v)
			for by, ch := range changes {
				if uid, _ := c.uid.Load().(string); by.Name == "sink" && string(by.UID) == uid {
					return ch.Generation
				}
			}
		}
	}
	return 0
}

// countPatch counts a paced patch that went through.
func (c *cell) countPatch(r apiproxy.Request, status int, first bool) {
	if status != 200 {
		return
	}
	name := r.Path[strings.LastIndex(r.Path, "/")+1:]
	c.mu.Lock()
	defer c.mu.Unlock()
	c.patches[name]++
	if first {
		c.waves++
	}
}

func (c *cell) patchCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.patches {
		out[k] = v
	}
	return out
}

// sample counts, every 100 ms until the test ends, the Deployments that
// carry the Binding and have not rolled out; it returns the most seen.
func (c *cell) sample() func() int {
	var most atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := c.kube.AppsV1().Deployments(c.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				n := 0
				for i := range list.Items {
					if d := &list.Items[i]; rollout.SinkOf(d) != "" && !rollout.RolledOut(c.t, d) {
						n++
					}
				}
				if int64(n) > most.Load() {
					most.Store(int64(n))
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	c.t.Cleanup(func() { cancel(); <-done })
	return func() int { return int(most.Load()) }
}

// waitHaltedAndRolledBack waits until the Binding reports its rollout
// halted and no Deployment carries its change; it returns the halted.
func (c *cell) waitHaltedAndRolledBack() []string {
	var halted []string
	rollout.Poll(c.t, 3*time.Minute, "the rollout to halt and its wave to be rolled back", func() string {
		cond, ro := rollout.Ready(c.t, c.dyn, c.ns, "sink")
		if cond == nil || cond.Reason != psbinding.ReasonRolloutHalted || ro == nil {
			return fmt.Sprintf("Ready %+v, rollout %+v; %s", cond, ro, rollout.DescribeDeployments(c.t, c.kube, c.ns))
		}
		for _, name := range ro.Halted {
			if !strings.Contains(cond.Message, name+": ") {
				return fmt.Sprintf("the message %q does not name %s and why", cond.Message, name)
			}
		}
		halted = ro.Halted
		return c.notRolledBack()
	})
	return halted
}

// check asserts the matrix's promises once the rollout halted.
func (c *cell) check(halted []string, before map[string]int64, maxSeen int) {
	t := c.t
	if maxSeen > maxChanging {
		t.Errorf("%d Deployments changed and not rolled out at once, more than %d", maxSeen, maxChanging)
	}
	for name, n := range c.patchCounts() {
		if n > 1 {
			t.Errorf("Deployment %s was patched %d times for the generation", name, n)
		}
		if !slices.Contains(halted, name) {
			t.Errorf("Deployment %s was patched but is not named in the halt %v", name, halted)
		}
	}
	for name, gen := range c.generations() {
		if gen != before[name] && !slices.Contains(halted, name) {
			t.Errorf("Deployment %s changed (generation %d, was %d) but is not named in the halt %v", name, gen, before[name], halted)
		}
	}
}

// generations are the Deployments' generations.
func (c *cell) generations() map[string]int64 {
	list, err := c.kube.AppsV1().Deployments(c.ns).List(c.t.Context(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, d := range list.Items {
		out[d.Name] = d.Generation
	}
	return out
}

// notRolledOut names a Deployment not rolled out, "" when all are; with
// bound, also one that carries the Binding.
func (c *cell) notRolledOut(bound bool) string {
	list, err := c.kube.AppsV1().Deployments(c.ns).List(c.t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for i := range list.Items {
		if d := &list.Items[i]; !rollout.RolledOut(c.t, d) || (bound && rollout.SinkOf(d) != "") {
			return d.Name + " not rolled out, or bound"
		}
	}
	return ""
}

// notRolledBack names a Deployment that still carries the Binding's
// change or its bound record, "" when none does.
func (c *cell) notRolledBack() string {
	list, err := c.kube.AppsV1().Deployments(c.ns).List(c.t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, d := range list.Items {
		if rollout.SinkOf(&d) != "" || len(d.Spec.Template.Spec.Containers) != 1 || d.Annotations[duck.BoundAnnotation] != "" {
			return fmt.Sprintf("%s still carries the change: %d containers, bound %q", d.Name, len(d.Spec.Template.Spec.Containers), d.Annotations[duck.BoundAnnotation])
		}
	}
	return ""
}

// recordsLeft names a Deployment with a record of bindkit's, "" when
// none has.
func (c *cell) recordsLeft() string {
	list, err := c.kube.AppsV1().Deployments(c.ns).List(c.t.Context(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, d := range list.Items {
		for _, key := range append(slices.Clone(duck.RecordAnnotations), duck.RollbackAnnotation) {
			if v, ok := d.Annotations[key]; ok {
				return fmt.Sprintf("%s keeps %s=%q", d.Name, key, v)
			}
		}
	}
	return ""
}
