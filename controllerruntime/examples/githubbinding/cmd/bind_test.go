package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"
)

// TestBindsInsideTheManager runs the example's main as deployed and binds
// through it: a Deployment by name and two by selector (the reconciler),
// one created later bound as it is created (the webhook, on the Manager's
// webhook server, whose caBundle bindkit took from cert-manager's
// Secret), every one unbound when its Binding goes, and a Binding naming
// another namespace refused by the namespace guard.
func TestBindsInsideTheManager(t *testing.T) {
	in := install(t)
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	m := in.start(t, reg)
	in.pointWebhookAt(t, m.webhookPort)
	kube := in.kube
	dyn := dynamic.NewForConfigOrDie(in.env.Config)
	bindings := bindingtest.NewBindings[v1alpha1.GithubBinding](t, in.env, testKind(t))
	ns := in.env.CreateNamespace(t, "shop-")
	for _, d := range []struct{ name, tier string }{{"web", "web"}, {"api-1", "api"}, {"api-2", "api"}} {
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, d.name, map[string]string{"tier": d.tier}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	bindings.Create(githubBinding(ns, "by-name", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}))
	bindings.Create(githubBinding(ns, "by-selector", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "api"}}}))
	waitBound(t, kube, ns, true, "web", "api-1", "api-2")
	poll(t, time.Minute, "the Bindings Ready", func() string {
		for _, name := range []string{"by-name", "by-selector"} {
			b := bindings.Get(ns, name)
			if c := b.Status.GetCondition("Ready"); c == nil || c.Status != metav1.ConditionTrue {
				return name + " not Ready"
			}
		}
		return ""
	})
	poll(t, time.Minute, "the webhook's caBundle from cert-manager's Secret", func() string {
		cfg, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, WebhookConfigurationName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(string(cfg.Webhooks[0].ClientConfig.CABundle), strings.TrimSpace(string(in.cert.CAPEM))) {
			return "caBundle is not the Secret's ca.crt"
		}
		if len(cfg.Webhooks[0].Rules) == 0 {
			return "no rules programmed"
		}
		return ""
	})
	// The kube-apiserver loads the configuration some time after it is
	// written: probe with a dry run until admission binds.
	poll(t, time.Minute, "admission to bind a dry-run create", func() string {
		d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "api-probe", map[string]string{"tier": "api"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error()
		}
		return bound(d, true)
	})

	// Admission: bound in the create's answer, before any reconcile.
	created, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "api-3", map[string]string{"tier": "api"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if msg := bound(created, true); msg != "" {
		t.Errorf("at admission: %s", msg)
	}
	if got := counter(t, reg, "bindkit_admission_requests_total"); got == 0 {
		t.Error("bindkit_admission_requests_total is 0 in the Manager's registry after an admission")
	}

	// The namespace guard, programmed by the leader, refuses a Binding
	// whose subject is in another namespace.
	poll(t, time.Minute, "the namespace guard to refuse", func() string {
		b := githubBinding(ns, "elsewhere", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "kube-system", Name: "coredns"})
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return "a Binding naming kube-system was admitted"
		}
		return ""
	})

	auditNamespace(t, in, ns)
	bindings.Delete(ns, "by-selector")
	waitBound(t, kube, ns, false, "api-1", "api-2", "api-3")
	waitBound(t, kube, ns, true, "web")
	bindings.Delete(ns, "by-name")
	waitBound(t, kube, ns, false, "web")
	auditNamespace(t, in, ns)
}

// auditNamespace runs the audit over ns while the Manager runs, with
// GithubBindings' Do: every record must be the truth.
func auditNamespace(t *testing.T, in *installation, ns string) {
	t.Helper()
	bindingtest.Audit(t, in.env, bindingtest.AuditOptions{Namespace: ns, Kinds: []audit.Kind{faults.GithubBindingKind}})
}

// counter sums the counter family name in reg.
func counter(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	return sum(t, reg, name, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

// gauge sums the gauge family name in reg, over the metrics whose label
// key has value.
func gauge(t *testing.T, reg prometheus.Gatherer, name, key, value string) float64 {
	t.Helper()
	return sum(t, reg, name, func(m *dto.Metric) float64 {
		for _, l := range m.GetLabel() {
			if l.GetName() == key && l.GetValue() == value {
				return m.GetGauge().GetValue()
			}
		}
		return 0
	})
}

func sum(t *testing.T, reg prometheus.Gatherer, name string, value func(*dto.Metric) float64) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += value(m)
			}
		}
	}
	return total
}

// testKind is the kind as main wires it, for bindingtest's Bindings.
func testKind(t *testing.T) *wiring.Kind {
	t.Helper()
	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		WebhookConfigurationName: WebhookConfigurationName, WebhookName: WebhookName, WebhookPath: WebhookPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return kind
}
