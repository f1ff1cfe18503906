package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

// TestLeaderElectionWithTwoManagers runs two replicas of the example's
// main, as the deployment does: the Manager that holds the Lease binds,
// the other one does not lead but answers admissions from its own index;
// when the leader stops (SIGTERM), the other Manager takes over and binds
// what comes next.
func TestLeaderElectionWithTwoManagers(t *testing.T) {
	in := install(t)
	ctx := t.Context()
	kube := in.kube
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := in.start(t, regA)
	waitLeader(t, "A", regA, 1)
	b := in.start(t, regB)
	// The follower answers the webhook.
	in.pointWebhookAt(t, b.webhookPort)
	bindings := bindingtest.NewBindings[v1alpha1.GithubBinding](t, in.env, testKind(t))
	ns := in.env.CreateNamespace(t, "shop-")
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", map[string]string{"tier": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindings.Create(githubBinding(ns, "web", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}}))
	waitBound(t, kube, ns, true, "web")
	if got := gauge(t, regB, "bindkit_leader", "controller", "githubbindings"); got != 0 {
		t.Errorf("B leads (bindkit_leader %v) while A holds the Lease", got)
	}
	if got := counter(t, regB, "bindkit_subject_patches_total"); got != 0 {
		t.Errorf("B, a follower, patched %v subjects", got)
	}
	// Bound at admission by the follower, once its index has the Binding.
	poll(t, time.Minute, "the follower to bind at admission", func() string {
		name := fmt.Sprintf("web-%d", time.Now().UnixNano())
		d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, name, map[string]string{"tier": "web"}), metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		return bound(d, true)
	})

	if err := a.stop(); err != nil {
		t.Fatalf("stop A: %v", err)
	}
	waitLeader(t, "B", regB, 1)
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "api", map[string]string{"tier": "api"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindings.Create(githubBinding(ns, "api", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}))
	waitBound(t, kube, ns, true, "api")
	auditNamespace(t, in, ns)
	bindings.Delete(ns, "api")
	bindings.Delete(ns, "web")
	waitBound(t, kube, ns, false, "api", "web")
	auditNamespace(t, in, ns)
}

// waitLeader waits until the Manager whose bindkit metrics are in reg
// leads (1) or follows (0).
func waitLeader(t *testing.T, which string, reg prometheus.Gatherer, want float64) {
	t.Helper()
	poll(t, time.Minute, "Manager "+which+" to lead", func() string {
		if got := gauge(t, reg, "bindkit_leader", "controller", "githubbindings"); got != want {
			return fmt.Sprintf("bindkit_leader %v", got)
		}
		return ""
	})
}
