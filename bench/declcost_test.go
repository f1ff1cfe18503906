package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/fixtures"
)

// BenchmarkDeclarativeAdmissionCost measures what a declarative kind's
// admission costs a Deployment create, by MutatingAdmissionPolicy and by
// webhook, in namespaces holding 0, 1, 10, 50 and 200 SinkBindings: the
// sinkbinding example binary with its default flags (by policy), then with
// --declarative-admission=webhook, alternated for the rounds asked
// (BINDKIT_BENCH_LATENCY_ROUNDS, default 2), one control plane. Each
// namespace's Bindings select app=sel-<i>; path=unnamed creates objects no
// Binding names, path=named objects that one of them (app=sel-0) names.
// It reports create-p50-ms and create-p99-ms.
func BenchmarkDeclarativeAdmissionCost(b *testing.B) {
	rounds := 2
	if v := os.Getenv(latencyRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", latencyRoundsEnv, v)
		}
		rounds = n
	}
	env := startControlPlane(b, "../"+sinkCRDPath)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	sizes := []int{0, 1, 10, 50, 200}
	namespaces := map[int]string{}
	for _, n := range sizes {
		ns := env.CreateNamespace(b, fmt.Sprintf("cost-%d-", n))
		namespaces[n] = ns
		for i := range n {
			sb := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": sinkv1alpha1.GroupVersionResource().GroupVersion().String(), "kind": sinkv1alpha1.Kind,
				"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("sink-%03d", i)},
				"spec": map[string]any{
					"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
						"selector": map[string]any{"matchLabels": map[string]any{"app": fmt.Sprintf("sel-%d", i)}}},
					"sink": "https://sink.example.com",
				},
			}}
			if _, err := dyn.Resource(sinkv1alpha1.GroupVersionResource()).Namespace(ns).Create(ctx, sb, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	createSystemNamespace(b, kube)
	const cfgPath = "../examples/sinkbinding/config/500-webhook-configuration.yaml"
	cfg, err := demo.WebhookConfigurationAt(cfgPath, 0)
	if err != nil {
		b.Fatal(err)
	}
	binary := buildBinary(b, "./examples/sinkbinding/cmd/controller")
	// start starts the binary with its listeners on ports the kernel
	// picks, and points the webhook configuration (created the first
	// time, as config/ installs it) at the port its webhook reported.
	start := func(args ...string) *process {
		listenFile := filepath.Join(b.TempDir(), "listen-addresses.json")
		p := startProcess(b, env.Dir, binary, append([]string{
			"--kubeconfig=" + env.KubeconfigPath, "--disable-ha",
			"--webhook-address=127.0.0.1", "--webhook-port=0", "--webhook-ip-sans=127.0.0.1",
			"--metrics-address=127.0.0.1:0", "--probe-port=0", "--listen-addresses-file=" + listenFile,
		}, args...), []string{"SYSTEM_NAMESPACE=" + demo.SystemNamespace}, false)
		installed, err := demo.WebhookConfigurationAt(cfgPath, p.webhookPort(b, listenFile))
		if err == nil {
			err = demo.InstallWebhookConfiguration(ctx, kube, installed)
		}
		if err != nil {
			p.stop(b)
			b.Fatal(err)
		}
		return p
	}
	policyName := policy.MutatingPolicyName(sinkv1alpha1.GroupVersionResource().GroupResource())
	rules := func() int {
		mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, cfg.Name, metav1.GetOptions{})
		if err != nil {
			return -1
		}
		return len(mwc.Webhooks[0].Rules)
	}
	paths := []struct {
		name  string
		args  []string
		ready func() (bool, error)
	}{
		{"policy", nil, func() (bool, error) {
			_, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policyName, metav1.GetOptions{})
			return err == nil && rules() == 0, nil
		}},
		{"webhook", []string{"--declarative-admission=webhook"}, func() (bool, error) {
			_, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policyName, metav1.GetOptions{})
			return err != nil && rules() > 0, nil
		}},
	}
	next := 0
	for range rounds {
		for _, p := range paths {
			proc := start(p.args...)
			poll(b, 2*time.Minute, "admission by "+p.name, p.ready)
			for _, n := range sizes {
				ns := namespaces[n]
				for _, named := range []bool{false, true} {
					if named && n == 0 {
						continue
					}
					app := "nobody"
					if named {
						app = "sel-0"
					}
					// Until admission binds here (a Binding just indexed or
					// published, a path just loaded).
					logged := 0
					poll(b, time.Minute, fmt.Sprintf("admission in %s", ns), func() (bool, error) {
						d := deploymentLabelled(ns, "probe", app)
						got, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
						ok := err == nil && sinkBound(got) == named
						if !ok && logged < 3 {
							logged++
							if err == nil {
								err = fmt.Errorf("bound %v, want %v: annotations %v", sinkBound(got), named, got.Annotations)
							}
							b.Logf("admission in %s not ready yet: %v", ns, err)
						}
						return ok, nil
					})
					b.Run(fmt.Sprintf("path=%s/bindings=%d/named=%v", p.name, n, named), func(b *testing.B) {
						var create []time.Duration
						controller0, server0 := proc.cpu(), pidsCPU(env.PIDs())
						for b.Loop() {
							d := deploymentLabelled(ns, fmt.Sprintf("d-%06d", next), app)
							next++
							t0 := time.Now()
							got, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
							create = append(create, time.Since(t0))
							if err != nil {
								b.Fatalf("create: %v", err)
							}
							if sinkBound(got) != named {
								b.Fatalf("create %s/%s: bound %v, want %v", ns, got.Name, sinkBound(got), named)
							}
						}
						reportLatencies(b, "create", create)
						n := float64(len(create))
						b.ReportMetric(float64((proc.cpu()-controller0).Microseconds())/1000/n, "controller-cpu-ms/create")
						b.ReportMetric(float64((pidsCPU(env.PIDs())-server0).Microseconds())/1000/n, "server-cpu-ms/create")
					})
				}
			}
			proc.stop(b)
		}
	}
}

// deploymentLabelled is a realistic Deployment labelled app=app.
func deploymentLabelled(ns, name, app string) *appsv1.Deployment {
	d := fixtures.RealisticDeployment(ns, name)
	// The fixture's object and template may share one labels map: the
	// template's must keep matching the selector.
	d.Labels = maps.Clone(d.Labels)
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	d.Labels["app"] = app
	return d
}
