package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/test/fixtures"
	"github.com/bindkit/bindkit/test/testenv"
)

// startControlPlane starts a real etcd and kube-apiserver for one top-level
// benchmark or test and stops it when that ends. The benchmarks of parts 1
// and 2 need none, so there is no process-wide control plane: each user
// starts its own (a few seconds) and runs its cases as sub-benchmarks of one
// function, which Go runs exactly once.
func startControlPlane(tb testing.TB, crdPaths ...string) *testenv.Environment {
	tb.Helper()
	env, err := testenv.Start(context.Background(), testenv.Options{CRDPaths: crdPaths})
	if errors.Is(err, testenv.ErrBinariesMissing) && !testenv.InCI() {
		tb.Skipf("needs a control plane: %v", err)
	}
	if err != nil {
		tb.Fatalf("start control plane: %v", err)
	}
	// The realistic fixture's two containers share port names, which the
	// kube-apiserver warns about on every create and patch; the warnings
	// would bury the benchmark lines.
	env.Config.WarningHandler = rest.NoWarnings{}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stop control plane: %v", err)
		}
	})
	return env
}

// createDeployments creates n realistic Deployments named d-00000... in ns
// with workers concurrent creators, and returns them as the server stored
// them (resourceVersion included), in name order. extraLabels are added to
// each Deployment's labels.
func createDeployments(ctx context.Context, kube kubernetes.Interface, ns string, n, workers int, extraLabels map[string]string) ([]*appsv1.Deployment, error) {
	out := make([]*appsv1.Deployment, n)
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				d := fixtures.RealisticDeployment(ns, fmt.Sprintf("d-%05d", i))
				for k, v := range extraLabels {
					d.Labels[k] = v
				}
				got, err := createWithRetry(ctx, kube, d)
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					continue
				}
				out[i] = got
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, firstErr
}

// createWithRetry retries a create the server refused for load (429, 5xx,
// timeouts): 16 creators on 2 shared cores can make the kube-apiserver shed
// requests, which says nothing about what is measured later.
func createWithRetry(ctx context.Context, kube kubernetes.Interface, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	var err error
	for attempt := range 5 {
		var got *appsv1.Deployment
		got, err = kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		if err == nil {
			return got, nil
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return nil, fmt.Errorf("create apps/v1 Deployment %s/%s: %w", d.Namespace, d.Name, err)
}

// cpuMeter adds up CPU time (user and system) of this process and of the
// control plane's processes, so a benchmark can report where the cores went
// while the timer ran: on 2 shared cores the client's CPU is taken from the
// kube-apiserver's.
type cpuMeter struct {
	pids           []int
	client, server time.Duration
	c0, s0         time.Duration
}

func newCPUMeter(env *testenv.Environment) *cpuMeter { return &cpuMeter{pids: env.PIDs()} }

func (m *cpuMeter) start() { m.c0, m.s0 = selfCPU(), pidsCPU(m.pids) }

func (m *cpuMeter) stop() {
	m.client += selfCPU() - m.c0
	m.server += pidsCPU(m.pids) - m.s0
}

// report adds client-cpu-s/op and server-cpu-s/op to b's results.
func (m *cpuMeter) report(b *testing.B) {
	b.ReportMetric(m.client.Seconds()/float64(b.N), "client-cpu-s/op")
	b.ReportMetric(m.server.Seconds()/float64(b.N), "server-cpu-s/op")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidsCPU reads utime and stime from /proc/<pid>/stat; 0 where that is not
// readable (not Linux).
func pidsCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name, field 2, may hold spaces: count from its ")".
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

// deleteDeployments deletes every Deployment of ns and waits until none is
// left, so that the informers of what runs next (cluster-wide, as a
// controller's are) hold only their own Deployments.
func deleteDeployments(tb testing.TB, kube kubernetes.Interface, ns string) {
	tb.Helper()
	deployments := kube.AppsV1().Deployments(ns)
	poll(tb, 10*time.Minute, "Deployments of "+ns+" deleted", func() (bool, error) {
		// A collection of thousands may outlast one request's timeout: the
		// next round deletes what is left.
		_ = deployments.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		list, err := deployments.List(context.Background(), metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
}
