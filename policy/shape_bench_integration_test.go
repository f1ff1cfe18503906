package policy_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/policy"
)

// BenchmarkBindingShapes measures what n Bindings of a namespace cost a
// Deployment create no Binding names, for two shapes of the policy's
// bindings, side by side on one control plane: shape=one is what
// MutatingPolicy was bound with before 2026-11-27 (one binding whose
// paramRef selects every Binding of the namespace: the kube-apiserver
// evaluates the policy once per Binding); shape=per-binding is what
// MutatingPolicyBinding returns, one binding per Binding, its paramRef
// naming the Binding and its matchResources carrying the Binding's
// namespace and selector, so the kube-apiserver drops a Binding that
// cannot name the object by a label-selector test before any evaluation.
// named=true creates Deployments one Binding selects (checked bound).
func BenchmarkBindingShapes(b *testing.B) {
	env := controlPlane.Env(b)
	ctx := b.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	api := kube.AdmissionregistrationV1()
	declared, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&declaredSpec)
	if err != nil {
		b.Fatal(err)
	}
	sizes := []int{0, 50, 200}
	for _, shape := range []string{"one", "per-binding"} {
		name := "bench-shape-" + shape
		opts := policy.MutatingPolicyOptions{Resource: envBindings, Kind: "EnvBinding", Name: name}
		m, err := policy.MutatingPolicy(opts)
		if err != nil {
			b.Fatal(err)
		}
		// What MutatingPolicy was bound with until 2026-11-27: one binding,
		// its paramRef selecting every Binding of the admitted object's
		// namespace.
		allow, equivalent := admissionregistrationv1.AllowAction, admissionregistrationv1.Equivalent
		mb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
				PolicyName: name,
				ParamRef:   &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: &allow},
				MatchResources: &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{}, MatchPolicy: &equivalent,
					NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"shape-one-0", "shape-one-50", "shape-one-200"}}}}},
			},
		}
		if _, err := api.MutatingAdmissionPolicies().Create(ctx, m, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for _, n := range sizes {
			ns := fmt.Sprintf("shape-%s-%d", shape, n)
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				bname := fmt.Sprintf("env-%03d", i)
				sel := map[string]string{"app": fmt.Sprintf("sel-%d", i)}
				createBinding(b, dyn, ns, bname, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
					"selector": map[string]any{"matchLabels": map[string]any{"app": sel["app"]}}}, declared)
				if shape == "per-binding" {
					bindPolicy(b, kube, opts, policy.BindingRef{Namespace: ns, Name: bname, Selector: &metav1.LabelSelector{MatchLabels: sel}})
				}
			}
		}
		if shape == "one" {
			if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, mb, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	deployment := func(ns, app string) *appsv1.Deployment {
		labels := map[string]string{"app": app}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "web-", Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "side", Image: "envoy"}}},
			}},
		}
	}
	bound := func(d *appsv1.Deployment) bool { return len(d.Spec.Template.Spec.Volumes) > 0 }
	for _, n := range sizes {
		for _, named := range []bool{false, true} {
			if named && n == 0 {
				continue
			}
			app := "nobody"
			if named {
				app = "sel-0"
			}
			for _, shape := range []string{"one", "per-binding"} {
				ns := fmt.Sprintf("shape-%s-%d", shape, n)
				poll(b, "admission in "+ns, func() (bool, error) {
					d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, app), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					return err == nil && bound(d) == named, err
				})
				b.Run(fmt.Sprintf("bindings=%d/named=%v/shape=%s", n, named, shape), func(b *testing.B) {
					var lat []time.Duration
					for b.Loop() {
						start := time.Now()
						d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, app), metav1.CreateOptions{})
						lat = append(lat, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						if bound(d) != named {
							b.Fatalf("%s/%s bound %v, want %v", ns, d.Name, bound(d), named)
						}
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		}
	}
}
