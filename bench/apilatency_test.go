package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/fixtures"
	"github.com/bindkit/bindkit/test/testenv"
)

// latencyRoundsEnv is how many times BenchmarkAdmissionLatency runs its
// paths, interleaved (none, unbound, bindkit, controller-runtime, none,
// ...); the default is 2.
const latencyRoundsEnv = "BINDKIT_BENCH_LATENCY_ROUNDS"

// crWebhookName names controller-runtime's webhook in its configuration,
// and so in the kube-apiserver's admission metrics.
const crWebhookName = "cr.bench.bindkit.dev"

// BenchmarkAdmissionLatency measures what a mutating webhook adds to a
// Deployment create and update as the user sees it: the API call's latency
// at the real kube-apiserver (client-go, one caller) and the
// kube-apiserver's own apiserver_admission_webhook_admission_duration_seconds
// for the webhook, side by side in one run and one control plane. Paths:
//
//   - path=none: a namespace no webhook selects (no configuration applies).
//   - path=bindkit-unbound: the example binary (default flags, ports the
//     kernel picks) serving, one GithubBinding in another namespace, creates in a
//     namespace without Bindings. The configuration's namespaceSelector
//     names only namespaces holding a Binding, so the kube-apiserver calls
//     no webhook (webhook-calls/op says so).
//   - path=bindkit: the same binary, a namespace whose selector GithubBinding
//     selects every Deployment created there (the patch is applied).
//   - path=policy: the sinkbinding example binary (default flags, ports
//     the kernel picks), a declarative kind admitted by MutatingAdmissionPolicy, its
//     webhook out of the path; a namespace whose selector SinkBinding
//     selects every Deployment created there (K_SINK and the bound
//     annotation applied by the kube-apiserver itself). No webhook is
//     called, so it reports no webhook-* figures.
//   - path=controller-runtime: controller-runtime's webhook server with a
//     Defaulter applying the same Do (the GithubBinding's), its own
//     configuration (same failurePolicy, timeout, rules) selecting its
//     namespace only.
//
// Each iteration creates one realistic Deployment (two containers, an init
// container) and then updates it (an annotation), timed separately:
// create-p50-ms, create-p99-ms, update-p50-ms, update-p99-ms. From the
// kube-apiserver's histogram (deltas over the sub-benchmark, create and
// update together) it reports webhook-mean-ms, webhook-p50-ms and
// webhook-p99-ms (interpolated within the histogram's buckets, which are
// coarse: 5, 25, 100, 500 ms, ...; the mean is the figure to compare) and
// webhook-calls/op, and the requests on deployments the kube-apiserver
// served meanwhile by verb (post/op, put/op, patch/op, ...), whoever sent
// them, and the example controller's CPU time (controller-cpu-ms/op, 10 ms
// ticks), whichever path runs.
func BenchmarkAdmissionLatency(b *testing.B) {
	rounds := 2
	if v := os.Getenv(latencyRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", latencyRoundsEnv, v)
		}
		rounds = n
	}
	env := startControlPlane(b, "../"+demo.CRDPath, "../"+sinkCRDPath)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	nsNone := env.CreateNamespace(b, "lat-none-")
	nsUnbound := env.CreateNamespace(b, "lat-unbound-")
	nsBound := env.CreateNamespace(b, "lat-bindkit-")
	nsCR := env.CreateNamespace(b, "lat-cr-")
	nsPolicy := env.CreateNamespace(b, "lat-policy-")

	// bindkit: the example binary as users run it.
	binary := buildBinary(b, controllerPackage)
	createSystemNamespace(b, kube)
	ctrl := startController(b, env, binary)
	b.Cleanup(func() { ctrl.stop(b) })
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersionResource().GroupVersion().String(), "kind": "GithubBinding",
		"metadata": map[string]any{"namespace": nsBound, "name": bindBindingName},
		"spec": map[string]any{
			"subject": map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"selector": map[string]any{"matchLabels": map[string]any{"tier": "backend"}},
			},
			"secret": map[string]any{"name": bindSecretName},
		},
	}}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(nsBound).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create GithubBinding %s/%s: %v", nsBound, bindBindingName, err)
	}

	// The policy: the sinkbinding example binary as users run it, its
	// webhook out of the path once the policy is in force.
	sink := startSinkController(b, env)
	b.Cleanup(func() { sink.stop(b) })
	sinkBinding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sinkv1alpha1.GroupVersionResource().GroupVersion().String(), "kind": sinkv1alpha1.Kind,
		"metadata": map[string]any{"namespace": nsPolicy, "name": "sink"},
		"spec": map[string]any{
			"subject": map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"selector": map[string]any{"matchLabels": map[string]any{"tier": "backend"}},
			},
			"sink": "https://sink.example.com",
		},
	}}
	if _, err := dyn.Resource(sinkv1alpha1.GroupVersionResource()).Namespace(nsPolicy).Create(ctx, sinkBinding, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create SinkBinding %s/sink: %v", nsPolicy, err)
	}

	// controller-runtime: its webhook server and a configuration for it.
	certs := newPKI(b)
	crURL, stopCR := startCRGithub(b, certs)
	b.Cleanup(stopCR)
	installCRWebhook(b, kube, crURL, certs.ca.CertPEM, nsCR)

	unbound := func(d *appsv1.Deployment) bool { return !githubBound(d) && !sinkBound(d) }
	paths := []struct {
		name, ns, webhook string
		bound             func(*appsv1.Deployment) bool
	}{
		{"none", nsNone, "", unbound},
		{"bindkit-unbound", nsUnbound, githubbinding.WebhookConfigurationName, unbound},
		{"bindkit", nsBound, githubbinding.WebhookConfigurationName, githubBound},
		{"policy", nsPolicy, "", sinkBound},
		{"controller-runtime", nsCR, crWebhookName, githubBound},
	}
	for _, p := range paths {
		poll(b, 2*time.Minute, "admission as path "+p.name+" in "+p.ns, func() (bool, error) {
			d, err := kube.AppsV1().Deployments(p.ns).Create(ctx, fixtures.RealisticDeployment(p.ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false, nil // the webhook may not serve yet: Fail policy
			}
			return p.bound(d), nil
		})
	}
	next := map[string]int{}
	for range rounds {
		for _, p := range paths {
			b.Run("path="+p.name, func(b *testing.B) {
				var create, update []time.Duration
				before := readAdmissionHistogram(b, kube, p.webhook)
				requestsBefore := readRequestCounts(b, kube)
				ctrlCPU := ctrl.cpu()
				for b.Loop() {
					d := fixtures.RealisticDeployment(p.ns, fmt.Sprintf("d-%05d", next[p.ns]))
					next[p.ns]++
					start := time.Now()
					got, err := kube.AppsV1().Deployments(p.ns).Create(ctx, d, metav1.CreateOptions{})
					create = append(create, time.Since(start))
					if err != nil {
						b.Fatalf("create: %v", err)
					}
					if !p.bound(got) {
						b.Fatalf("create %s/%s: not admitted as path %s: %+v", p.ns, got.Name, p.name, got.Spec.Template.Spec)
					}
					got.Annotations = map[string]string{"bench.bindkit.dev/round": strconv.Itoa(next[p.ns])}
					start = time.Now()
					_, err = kube.AppsV1().Deployments(p.ns).Update(ctx, got, metav1.UpdateOptions{})
					update = append(update, time.Since(start))
					if err != nil {
						b.Fatalf("update: %v", err)
					}
				}
				h := readAdmissionHistogram(b, kube, p.webhook).sub(before)
				// The example controller's CPU meanwhile, whichever path:
				// on shared cores it is taken from the kube-apiserver's.
				b.ReportMetric(float64((ctrl.cpu()-ctrlCPU).Microseconds())/1000/float64(b.N), "controller-cpu-ms/op")
				// Every request on deployments the kube-apiserver served
				// meanwhile, the benchmark's two included: what the
				// controller sends on its own shows up here.
				requests := readRequestCounts(b, kube).sub(requestsBefore)
				for _, verb := range []string{"POST", "PUT", "GET", "LIST", "PATCH", "APPLY"} {
					if requests[verb] > 0 {
						b.ReportMetric(requests[verb]/float64(b.N), strings.ToLower(verb)+"/op")
					}
				}
				reportLatencies(b, "create", create)
				reportLatencies(b, "update", update)
				b.ReportMetric(h.count/float64(b.N), "webhook-calls/op")
				if h.count > 0 {
					b.ReportMetric(h.sum/h.count*1000, "webhook-mean-ms")
					b.ReportMetric(h.quantile(0.5)*1000, "webhook-p50-ms")
					b.ReportMetric(h.quantile(0.99)*1000, "webhook-p99-ms")
				}
			})
		}
	}
}

// sinkCRDPath is the sinkbinding example's CRD, from the repository root.
const sinkCRDPath = "examples/sinkbinding/config/300-sinkbinding.yaml"

// sinkBound reports whether a SinkBinding bound d: K_SINK in its first
// container.
func sinkBound(d *appsv1.Deployment) bool {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == sinkv1alpha1.SinkEnv {
			return true
		}
	}
	return false
}

// startSinkController starts the sinkbinding example binary as users run
// it, with ports the kernel picks for its webhook, metrics and probes, in
// a system namespace of its own (so its certificates are not the
// githubbinding controller's); admitting by policy, its webhook is out of
// the path once the policy is in force (no configuration here reaches it).
func startSinkController(b *testing.B, env *testenv.Environment) *process {
	b.Helper()
	const system = "bindkit-sink-system"
	if _, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: system}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return startProcess(b, env.Dir, buildBinary(b, "./examples/sinkbinding/cmd/controller"), []string{
		"--kubeconfig=" + env.KubeconfigPath,
		"--disable-ha",
		"--webhook-address=127.0.0.1", "--webhook-port=0", "--webhook-ip-sans=127.0.0.1",
		"--metrics-address=127.0.0.1:0",
		"--probe-port=0",
	}, []string{"SYSTEM_NAMESPACE=" + system}, false)
}

// reportLatencies reports the p50 and p99 of lat in milliseconds.
func reportLatencies(b *testing.B, what string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), what+"-p50-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), what+"-p99-ms")
}

// histogram is one webhook's apiserver_admission_webhook_admission_duration_seconds,
// summed over its other labels (operation, type, rejected): cumulative
// counts by upper bound, sum and count.
type histogram struct {
	buckets    map[float64]float64
	sum, count float64
}

// readAdmissionHistogram scrapes the kube-apiserver's /metrics for the
// admission duration of the webhook named name; empty for no webhook.
func readAdmissionHistogram(tb testing.TB, kube kubernetes.Interface, name string) histogram {
	tb.Helper()
	h := histogram{buckets: map[float64]float64{}}
	if name == "" {
		return h
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("read kube-apiserver metrics: %v", err)
	}
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	for line := range strings.SplitSeq(string(raw), "\n") {
		n, l, v, ok := parseSample(line)
		if !ok || !strings.HasPrefix(n, metric) || l["name"] != name {
			continue
		}
		switch strings.TrimPrefix(n, metric) {
		case "_bucket":
			le, err := strconv.ParseFloat(l["le"], 64)
			if err != nil {
				le = math.Inf(1)
			}
			h.buckets[le] += v
		case "_sum":
			h.sum += v
		case "_count":
			h.count += v
		}
	}
	return h
}

// sub returns h - before.
func (h histogram) sub(before histogram) histogram {
	out := histogram{buckets: map[float64]float64{}, sum: h.sum - before.sum, count: h.count - before.count}
	for le, v := range h.buckets {
		out.buckets[le] = v - before.buckets[le]
	}
	return out
}

// quantile interpolates the q-quantile linearly within its bucket, as
// Prometheus' histogram_quantile does; the highest finite bound when it
// falls in the +Inf bucket.
func (h histogram) quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	rank := q * h.count
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		c := h.buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if c == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(c-below)
		}
		lower, below = le, c
	}
	return lower
}

// startCRGithub serves controller-runtime's webhook with a Defaulter that
// applies the GithubBinding's Do to Deployments labelled tier=backend, on a
// free loopback port, with the certificate of p.
func startCRGithub(b *testing.B, p *pki) (string, func()) {
	dir := b.TempDir()
	for name, data := range map[string][]byte{"tls.crt": p.serving.CertPEM, "tls.key": p.serving.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	port := freePort(b)
	srv := crwebhook.NewServer(crwebhook.Options{
		Host:    "127.0.0.1",
		Port:    port,
		CertDir: dir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS13
			c.NextProtos = []string{"http/1.1"}
		}},
	})
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	srv.Register("/githubbindings", admission.WithDefaulter(scheme, &crGithub{selector: labels.SelectorFromSet(labels.Set{"tier": "backend"})}))
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- srv.Start(ctx) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	stop := func() {
		cancel()
		if err := <-started; err != nil {
			b.Error(err)
		}
	}
	if err, exited := waitTLS(addr, p, started); err != nil {
		if !exited {
			stop()
		}
		b.Fatal(err)
	}
	return "https://" + addr + "/githubbindings", stop
}

// crGithub is the GithubBinding by selector written for controller-runtime:
// the same Do on the Deployment's pod template.
type crGithub struct{ selector labels.Selector }

// Default implements admission.Defaulter.
func (c *crGithub) Default(_ context.Context, d *appsv1.Deployment) error {
	if !c.selector.Matches(labels.Set(d.Labels)) {
		return nil
	}
	wp := &duck.WithPod{ObjectMeta: d.ObjectMeta, Spec: duck.WithPodSpec{Template: d.Spec.Template}}
	githubDo(wp)
	d.Spec.Template = wp.Spec.Template
	return nil
}

// installCRWebhook configures the kube-apiserver to call controller-runtime's
// webhook at url for Deployments of ns, with the failure policy and timeout
// of bindkit's example configuration.
func installCRWebhook(tb testing.TB, kube kubernetes.Interface, url string, caPEM []byte, ns string) {
	tb.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(10)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: crWebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    crWebhookName,
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), mwc, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create MutatingWebhookConfiguration %s: %v", crWebhookName, err)
	}
}
