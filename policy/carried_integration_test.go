package policy_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
)

// TestMutatingPolicyMergesOnlyWhatChangesWithRealAPIServer checks the
// policy's test that an object already carries a Binding's change (it is
// then not merged again: the policy's own mutation makes the
// kube-apiserver invoke it a second time) against what must still be
// merged, by server-side dry-run creates of a Deployment the Binding
// names:
//
//   - a container another mutating policy adds after the Binding's first
//     merge gets the Binding's env entry and mount (the second invocation
//     sees a change to make). The other policy adds it only to an object
//     that records a Binding, so whichever of the two policies the
//     kube-apiserver runs first, the container arrives after the Binding's
//     first merge;
//   - an object recording the Binding at its published generation and
//     carrying its change but another value for its env entry gets the
//     Binding's value;
//   - an object carrying the change and its record comes back as it was.
func TestMutatingPolicyMergesOnlyWhatChangesWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	const ns = "carried"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	opts := policy.MutatingPolicyOptions{Resource: envBindings, Kind: "EnvBinding", Name: "carried-env"}
	declared := createPolicy(t, kube, opts)
	createBinding(t, dyn, ns, "env", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, declared)
	bindPolicy(t, kube, opts, policy.BindingRef{Namespace: ns, Name: "env"})
	b, err := dyn.Resource(envBindings).Namespace(ns).Get(ctx, "env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entry := duck.BoundBy{Resource: envBindings.GroupResource(), Name: "env", UID: b.GetUID()}.Entry(b.GetGeneration())
	createLateSidecarPolicy(t, kube, ns)

	base := shapeObjects(ns)["apps/v1 Deployment"].obj.(*appsv1.Deployment)
	dryCreate := func(d *appsv1.Deployment) *appsv1.Deployment {
		t.Helper()
		got, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("dry-run create: %v", err)
		}
		return got
	}
	poll(t, "the policies to bind a Deployment", func() (bool, error) {
		got := dryCreate(base.DeepCopy())
		return len(got.Spec.Template.Spec.Containers) == 4, nil // app, side, binding-proxy, late
	})

	t.Run("a container added after the first merge", func(t *testing.T) {
		got := dryCreate(base.DeepCopy())
		late := container(got, "late")
		if late == nil {
			t.Fatalf("no container late in %v", names(got))
		}
		want := corev1.Container{Name: "late", Env: declaredSpec.Env, VolumeMounts: declaredSpec.VolumeMounts}
		if diff := cmp.Diff(want, corev1.Container{Name: late.Name, Env: late.Env, VolumeMounts: late.VolumeMounts}); diff != "" {
			t.Errorf("container late (-want +got):\n%s", diff)
		}
	})

	bound := dryCreate(base.DeepCopy())
	for _, tc := range []struct {
		name string
		edit func(*appsv1.Deployment)
	}{
		{"the record and the change but another value", func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{duck.BoundAnnotation: entry}
			d.Spec.Template.Spec = *bound.Spec.Template.Spec.DeepCopy()
			for _, c := range d.Spec.Template.Spec.Containers {
				for i := range c.Env {
					if c.Env[i].Name == "BINDING_URL" {
						c.Env[i].Value = "https://stale.example.com"
					}
				}
			}
		}},
		{"the change and its record", func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{duck.BoundAnnotation: entry}
			d.Spec.Template.Spec = *bound.Spec.Template.Spec.DeepCopy()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base.DeepCopy()
			tc.edit(in)
			got := dryCreate(in)
			if diff := cmp.Diff(bound.Spec.Template.Spec, got.Spec.Template.Spec); diff != "" {
				t.Errorf("pod spec (-bound from scratch +got):\n%s", diff)
			}
			if got, want := got.Annotations[duck.BoundAnnotation], entry; got != want {
				t.Errorf("%s = %q, want %q", duck.BoundAnnotation, got, want)
			}
		})
	}

	// A newer bindkit's record of the Binding (duck.RecordFormat) is left
	// alone, and so is the object: nothing merged, the record as it was.
	t.Run("a record of a newer format", func(t *testing.T) {
		newer := duck.BoundBy{Resource: envBindings.GroupResource(), Name: "env", UID: b.GetUID()}.String() + ":v2;1;digest=1"
		for _, key := range []string{duck.BoundAnnotation, duck.HeldAnnotation} {
			in := base.DeepCopy()
			in.Annotations = map[string]string{key: newer}
			got := dryCreate(in)
			if slices.ContainsFunc(got.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "binding-proxy" }) {
				t.Errorf("%s: the Binding was merged into an object that holds its newer record: containers %v", key, names(got))
			}
			if got.Annotations[key] != newer {
				t.Errorf("%s = %q, want %q", key, got.Annotations[key], newer)
			}
		}
	})
}

// createLateSidecarPolicy programs a mutating policy, as another
// project's sidecar injector would be, that adds a container "late" to
// the Deployments of ns that record a Binding, and may be invoked again.
// It tests the record in its mutation, not in a match condition: the
// kube-apiserver invokes again only a policy it invoked, and one whose
// match condition was false when it came first was not.
func createLateSidecarPolicy(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	fail, ifNeeded := admissionregistrationv1.Fail, admissionregistrationv1.IfNeededReinvocationPolicy
	const name = "late-sidecar"
	spec := "Object.spec.template.spec"
	m := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: "has(object.metadata.annotations) && '" + duck.BoundAnnotation + "' in object.metadata.annotations ? " +
					"Object{spec: Object.spec{template: Object.spec.template{spec: " + spec + "{containers: [" + spec + ".containers{name: 'late', image: 'busybox'}]}}}} : Object{}"},
			}},
			FailurePolicy:      &fail,
			ReinvocationPolicy: ifNeeded,
		},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingAdmissionPolicy %s: %v", name, err)
	}
	mb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, mb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingAdmissionPolicyBinding %s: %v", name, err)
	}
}

func container(d *appsv1.Deployment, name string) *corev1.Container {
	for i, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

func names(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}
