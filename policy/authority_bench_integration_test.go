package policy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/policy"
)

// BenchmarkBindingCreateLatency measures the kube-apiserver's latency of
// a Binding's create by a user with the rights it needs (impersonated, so
// RBAC authorizes every request as in a cluster), side by side in one run:
// with no policy on the kind, with the authority policy and the
// requested-by record (one authorization check of the subject, one
// mutation), and with a Reference too (one more check per name). It
// reports p50 and p99 per case; record them in bench/RESULTS.md.
func BenchmarkBindingCreateLatency(b *testing.B) {
	env := controlPlane.Env(b)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	const ns = "bench-authority"
	mustCreate(b, ns, kube)
	grant(b, kube, ns, "bench-author", nil, rule("test.bindkit.dev", "envbindings", "create"), rule("apps", "deployments", "patch"), rule("", "secrets", "get"))
	client := as(b, env.Config, "bench-author").Resource(envBindings).Namespace(ns)
	spec := map[string]any{
		"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"secret":  map[string]any{"name": "token"},
	}
	measure := func(b *testing.B, prefix string) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			obj := envBinding(ns, fmt.Sprintf("%s-%d", prefix, i), spec)
			i++
			start := time.Now()
			if _, err := client.Create(b.Context(), obj, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.Run("none", func(b *testing.B) { measure(b, "none") })

	opts := policy.AuthorityOptions{Resource: envBindings, Name: "authority.bench.test"}
	programB(b, kube, opts, "requested-by.bench.test")
	b.Run("authority", func(b *testing.B) { measure(b, "authority") })

	refs := opts
	refs.Name = "authority-refs.bench.test"
	refs.References = []policy.Reference{{Paths: []string{"spec.secret.name"}, Resource: "secrets", Verb: "get"}}
	deleteVAP(b, kube, opts.Name)
	programB(b, kube, refs, "")
	b.Run("authority+reference", func(b *testing.B) { measure(b, "refs") })
}

// programB writes the authority policy of opts, and the requested-by
// record named requestedBy unless empty, and waits a few seconds for the
// kube-apiserver to load them.
func programB(b *testing.B, kube kubernetes.Interface, opts policy.AuthorityOptions, requestedBy string) {
	b.Helper()
	ctx := b.Context()
	admission := kube.AdmissionregistrationV1()
	vap, vapb, err := policy.Authority(opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, vapb, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if requestedBy != "" {
		m, mb, err := policy.RequestedBy(envBindings, requestedBy)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := admission.MutatingAdmissionPolicies().Create(ctx, m, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := admission.MutatingAdmissionPolicyBindings().Create(ctx, mb, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// The kube-apiserver reloads policies about every second.
	time.Sleep(3 * time.Second)
}

func deleteVAP(b *testing.B, kube kubernetes.Interface, name string) {
	b.Helper()
	admission := kube.AdmissionregistrationV1()
	if err := admission.ValidatingAdmissionPolicyBindings().Delete(b.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	if err := admission.ValidatingAdmissionPolicies().Delete(b.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
}
