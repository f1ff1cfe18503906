package policy_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
)

// TestMutatingPolicyAppliesCurrentSpecWithRealAPIServer programs a
// declarative kind's policy with a SpecPath (the Spec as its user writes
// it in the Binding, declarative.InBinding), and no controller publishing
// anything: a workload created after each edit of the Binding carries that
// edit, recorded at the Binding's generation; a Binding its controller
// reports invalid at its generation is skipped (the workload is admitted
// unbound, not refused). Once with an env entry alone, once with a volume,
// its mount and initContainersToo.
func TestMutatingPolicyAppliesCurrentSpecWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, tc := range []struct {
		name string
		// spec is the Binding's spec at edit i (1, 2), want the env entry a
		// workload gets, mounted whether a volume is mounted.
		spec    func(i int) map[string]any
		want    func(i int) corev1.EnvVar
		mounted bool
	}{{
		name: "env",
		spec: func(i int) map[string]any {
			return map[string]any{"declare": map[string]any{"env": []any{map[string]any{"name": "X", "value": fmt.Sprint(i)}}}}
		},
		want: func(i int) corev1.EnvVar { return corev1.EnvVar{Name: "X", Value: fmt.Sprint(i)} },
	}, {
		name: "volume", mounted: true,
		spec: func(i int) map[string]any {
			return map[string]any{"declare": map[string]any{
				"env":               []any{map[string]any{"name": "SINK", "value": fmt.Sprintf("https://sink-%d.example.com", i)}},
				"volumeMounts":      []any{map[string]any{"name": "certs", "mountPath": "/certs", "readOnly": true}},
				"volumes":           []any{map[string]any{"name": "certs", "secret": map[string]any{"secretName": "certs", "defaultMode": int64(420)}}},
				"initContainersToo": true,
			}}
		},
		want: func(i int) corev1.EnvVar {
			return corev1.EnvVar{Name: "SINK", Value: fmt.Sprintf("https://sink-%d.example.com", i)}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "proj-" + tc.name
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			opts := policy.MutatingPolicyOptions{Resource: envBindings, Kind: "EnvBinding", Name: "bind-" + ns, SpecPath: "spec.declare"}
			createPolicy(t, kube, opts)
			client := dyn.Resource(envBindings).Namespace(ns)
			spec := tc.spec(1)
			spec["subject"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}
			b, err := client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": envBindings.GroupVersion().String(), "kind": "EnvBinding",
				"metadata": map[string]any{"namespace": ns, "name": "env"}, "spec": spec,
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bindPolicy(t, kube, opts, policy.BindingRef{Namespace: ns, Name: "env", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
			by := duck.BoundBy{Resource: envBindings.GroupResource(), Name: "env", UID: b.GetUID()}
			// admitted is what a create of a Deployment gets now: its
			// first container's env entry of the test's name, whether the
			// init container has it too and a volume is mounted, and its
			// record of the Binding.
			admitted := func() (got corev1.EnvVar, initToo, mounted bool, gen int64, err error) {
				d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
					Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
							InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
							Containers:     []corev1.Container{{Name: "app", Image: "nginx"}}}}}}
				created, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					return got, false, false, 0, err
				}
				name := tc.want(1).Name
				for _, e := range created.Spec.Template.Spec.Containers[0].Env {
					if e.Name == name {
						got = e
					}
				}
				for _, e := range created.Spec.Template.Spec.InitContainers[0].Env {
					initToo = initToo || e.Name == name
				}
				mounted = len(created.Spec.Template.Spec.Containers[0].VolumeMounts) == 1 && len(created.Spec.Template.Spec.Volumes) == 1
				gen, _ = duck.BoundGeneration(created.Annotations, by)
				return got, initToo, mounted, gen, nil
			}
			for i := 1; i <= 2; i++ {
				if i == 2 {
					b, err = client.Get(ctx, "env", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					next := tc.spec(2)
					next["subject"] = spec["subject"]
					b.Object["spec"] = next
					if b, err = client.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				poll(t, fmt.Sprintf("a create to carry edit %d at generation %d", i, b.GetGeneration()), func() (bool, error) {
					got, initToo, mounted, gen, err := admitted()
					if err != nil {
						return false, err
					}
					if got != tc.want(i) || gen != b.GetGeneration() {
						return false, nil
					}
					if initToo != tc.mounted || mounted != tc.mounted {
						return false, fmt.Errorf("init container has the entry: %v, volume mounted: %v; want %v", initToo, mounted, tc.mounted)
					}
					return true, nil
				})
			}
			// Its controller reports generation 2 invalid: skipped.
			b.Object["status"] = map[string]any{"observedGeneration": b.GetGeneration(), "conditions": []any{
				map[string]any{"type": "Ready", "status": "False", "reason": policy.ReasonBindingInvalid, "message": "declared Spec: ...", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
			if _, err := client.UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			poll(t, "a Binding reported invalid to be skipped", func() (bool, error) {
				got, _, _, gen, err := admitted()
				return err == nil && got == (corev1.EnvVar{}) && gen == 0, err
			})
		})
	}
}
