package policy_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/demo"
)

// BenchmarkDeploymentCreateLatency measures the kube-apiserver's create
// latency of a Deployment, side by side in one run: with no admission
// mutation at all, through bindkit's webhook (the example binary, a
// GithubBinding selecting the Deployment), and through the mutating policy
// of a declarative kind (an EnvBinding selecting it). It reports p50 and
// p99 per path; record them in bench/RESULTS.md.
func BenchmarkDeploymentCreateLatency(b *testing.B) {
	env := controlPlane.Env(b)
	ctx := b.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, ns := range []string{demo.SystemNamespace, "bench-none", "bench-webhook", "bench-policy"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	labels := map[string]string{"app": "web"}
	deployment := func(ns string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "web-", Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "side", Image: "envoy"}}},
			}},
		}
	}
	measure := func(b *testing.B, ns string) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	bound := func(ns string, check func(*appsv1.Deployment) bool) {
		poll(b, "admission to bind a Deployment in "+ns, func() (bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return false, err
			}
			return check(d), nil
		})
	}

	// No mutation: nothing programmed yet.
	b.Run("none", func(b *testing.B) { measure(b, "bench-none") })

	// The webhook: the example binary, one GithubBinding by selector.
	repoRoot, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	binary := filepath.Join(b.TempDir(), "githubbinding-controller")
	if err := demo.BuildController(ctx, repoRoot, binary); err != nil {
		b.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary)
	if err != nil {
		b.Fatal(err)
	}
	// Pointed at the port the controller reported (it binds one the
	// kernel picks).
	cfg, err := demo.WebhookConfiguration(repoRoot, ctrl.WebhookPort)
	if err != nil {
		ctrl.Kill()
		b.Fatal(err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		ctrl.Kill()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := ctrl.Stop(); err != nil {
			b.Errorf("stop controller: %v", err)
		}
	})
	gh := githubBinding("bench-webhook", "gh", "")
	gh.Object["spec"].(map[string]any)["subject"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}
	if _, err := dyn.Resource(githubBindings).Namespace("bench-webhook").Create(ctx, gh, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	bound("bench-webhook", func(d *appsv1.Deployment) bool { return len(d.Spec.Template.Spec.Volumes) > 0 })

	// The policy: one EnvBinding by selector, its Spec published.
	opts := policy.MutatingPolicyOptions{Resource: envBindings, Kind: "EnvBinding"}
	declared := createPolicy(b, kube, opts)
	bindPolicy(b, kube, opts, policy.BindingRef{Namespace: "bench-policy", Name: "env", Selector: &metav1.LabelSelector{MatchLabels: labels}})
	createBinding(b, dyn, "bench-policy", "env", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, declared)
	bound("bench-policy", func(d *appsv1.Deployment) bool { return len(d.Spec.Template.Spec.Volumes) > 0 })

	b.Run("webhook", func(b *testing.B) { measure(b, "bench-webhook") })
	b.Run("policy", func(b *testing.B) { measure(b, "bench-policy") })
}
