package envtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed" // the kwok stages
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// FailPodAnnotation is the annotation that, set on a pod (or a workload's
// pod template) with any value, makes the simulated node of Options.Workloads
// run the pod without it ever becoming Ready: its containers wait in
// CrashLoopBackOff with three restarts behind them, as a container that
// keeps crashing does.
const FailPodAnnotation = "envtest.bindkit.dev/fail"

// FailingImage is a container image that fails the same way as
// FailPodAnnotation: a pod with a container (not an init container) of this
// exact image runs but never becomes Ready. A Binding under test can inject
// it, say as a sidecar, to show what a Binding that breaks its pods does to
// the workloads it touches.
const FailingImage = "envtest.bindkit.dev/fail"

// KwokNodeAnnotation marks the nodes that Options.Workloads creates and kwok
// manages; nodes a test creates with it are managed too.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// kwokBinary is the executable that simulates nodes and pods. One build
// serves every minor: Start looks for it in the minor's directory, then in
// the directory above (the newest minor's, BINDKIT_BIN_DIR itself).
const kwokBinary = "kwok"

// Kwok is the sigs.k8s.io/kwok version bindkit's tools module
// (hack/tools/kwok) builds and tests against.
const Kwok = "v0.8.0"

// defaultNodes is how many fake nodes Options.Workloads creates when
// Options.Nodes is zero.
const defaultNodes = 2

// kwokStages is kwok's configuration: the Stage objects that make nodes
// Ready and move pods to Running and Ready (or crash-looping, see
// FailPodAnnotation), complete Jobs' pods and remove deleted pods.
//
//go:embed kwok/stages.yaml
var kwokStages []byte

// WorkloadControllers returns the kube-controller-manager controllers that
// Options.Workloads adds to Options.Controllers (or DefaultControllers):
// those that turn Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs
// and CronJobs into pods and report their status.
func WorkloadControllers() []string {
	return []string{
		"deployment-controller", "replicaset-controller", "statefulset-controller",
		"daemonset-controller", "job-controller", "cronjob-controller",
	}
}

// withWorkloadControllers returns controllers with every WorkloadControllers
// name it lacks appended.
func withWorkloadControllers(controllers []string) []string {
	out := slices.Clone(controllers)
	for _, c := range WorkloadControllers() {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// resolveKwok returns the path of the kwok binary: in binDir, else in the
// directory above it when binDir is another minor's subdirectory of
// BINDKIT_BIN_DIR.
func resolveKwok(binDir string) (string, error) {
	candidates := []string{filepath.Join(binDir, kwokBinary)}
	if filepath.Base(binDir) != "" && minorDirPattern(filepath.Base(binDir)) {
		candidates = append(candidates, filepath.Join(filepath.Dir(binDir), kwokBinary))
	}
	for _, path := range candidates {
		if info, err := os.Stat(path); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: kwok (Options.Workloads): not in %v; bindkit's own repository builds it with `make tools`, others with `%s` (which builds kwok %s beside the control plane)", ErrBinariesMissing, candidates, BuildCommand, Kwok)
}

// minorDirPattern reports whether name is a minor's subdirectory name, v1.36.
func minorDirPattern(name string) bool {
	return len(name) > 1 && name[0] == 'v' && minorPattern.MatchString(name[1:])
}

// startScheduler runs kube-scheduler against the environment's
// kube-apiserver as the administrator and waits for its /healthz, served
// over HTTPS with the loopback certificate like kube-controller-manager's.
func (e *Environment) startScheduler(ctx context.Context, binDir string, f *apiServerFiles, port int) error {
	p, err := startProcess(schedulerBinary, filepath.Join(binDir, schedulerBinary), []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		// One instance, stopped with the environment: nothing to elect.
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + f.certFile,
		"--tls-private-key-file=" + f.keyFile,
		"--v=0",
	}, e.Dir)
	if err != nil {
		return err
	}
	e.scheduler = p
	return e.stopIfFailed(p, waitHealthy(ctx, p, loopbackClient(f), fmt.Sprintf("https://127.0.0.1:%d/healthz", port)))
}

// loopbackClient is an HTTPS client that trusts the loopback CA.
func loopbackClient(f *apiServerFiles) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.serving.CAPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// startKwok writes kwok's stages, runs kwok on the nodes that carry
// KwokNodeAnnotation, creates nodes of them and waits until they are
// Ready. kwok serves its health endpoints (and no kubelet API) on port.
func (e *Environment) startKwok(ctx context.Context, kwokPath string, port, nodes int) error {
	config := filepath.Join(e.Dir, "kwok.yaml")
	if err := os.WriteFile(config, kwokStages, 0o600); err != nil {
		return fmt.Errorf("kwok: write %s: %w", config, err)
	}
	p, err := startProcess(kwokBinary, kwokPath, []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--config=" + config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--node-ip=10.240.0.1",
		"--cidr=10.244.0.0/16",
	}, e.Dir)
	if err != nil {
		return err
	}
	e.kwok = p
	if err := waitHealthy(ctx, p, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil {
		return e.stopIfFailed(p, err)
	}
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("kwok: client: %w", err)
	}
	var names []string
	for i := range nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		names = append(names, name)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"type": "kwok",
			},
		}}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kwok: create node %s: %w", name, err)
		}
	}
	if err := e.waitNodesReady(ctx, client, p, names); err != nil {
		return e.stopIfFailed(p, err)
	}
	return untaintNodes(ctx, client, names)
}

// untaintNodes removes the node.kubernetes.io/not-ready taint the
// kube-apiserver's TaintNodesByCondition admission gives every new node. In a
// cluster kube-controller-manager's node-lifecycle controller lifts it once
// the node is Ready; Workloads does not run that controller (it would also
// evict pods from a node whose heartbeats lag on a busy machine), so Start
// lifts it itself.
func untaintNodes(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
				return t.Key == corev1.TaintNodeNotReady
			})
			if len(kept) == len(node.Spec.Taints) {
				return nil
			}
			node.Spec.Taints = kept
			_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("kwok: node %s: remove taint %s: %w", name, corev1.TaintNodeNotReady, err)
		}
	}
	return nil
}

// waitNodesReady polls the nodes until each reports Ready, kwok exits, or
// ctx ends.
func (e *Environment) waitNodesReady(ctx context.Context, client kubernetes.Interface, kwok *process, names []string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := kwok.exitedError(); err != nil {
			return err
		}
		var notReady []string
		for _, name := range names {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				notReady = append(notReady, name)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kwok: nodes %v not Ready before %v; last lines of %s:\n%s",
				notReady, context.Cause(ctx), kwok.logPath, kwok.logTail(logTailLines))
		case <-tick.C:
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// errNoNodes reports a negative Options.Nodes.
var errNoNodes = errors.New("envtest: Options.Nodes must not be negative")
