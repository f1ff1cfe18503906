package policy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
)

var envBindings = schema.GroupVersionResource{Group: "test.bindkit.dev", Version: "v1", Resource: "envbindings"}

// declaredSpec is what the test Binding declares: an env entry, a volume
// and its mount, a sidecar and an init container.
var declaredSpec = declarative.Spec{
	Env:          []corev1.EnvVar{{Name: "BINDING_URL", Value: "https://example.com"}},
	VolumeMounts: []corev1.VolumeMount{{Name: "binding-certs", MountPath: "/var/run/binding", ReadOnly: true}},
	Volumes:      []corev1.Volume{{Name: "binding-certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "certs", DefaultMode: ptrTo(int32(0o644))}}}},
	// The containers carry the defaults the API server fills in, so the
	// derived Do, applied here without a server, gives the same pod spec.
	InitContainers: []corev1.Container{{Name: "binding-init", Image: "busybox", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"}},
	Containers:     []corev1.Container{{Name: "binding-proxy", Image: "envoy", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"}},
}

// shapeObjects returns one object of every built-in workload shape in ns,
// labelled app=web, with two containers, and the function that finds its
// pod spec in what the server returns.
func shapeObjects(ns string) map[string]struct {
	obj     runtime.Object
	podSpec func(*unstructured.Unstructured) (*corev1.PodSpec, error)
} {
	labels := map[string]string{"app": "web"}
	pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "nginx", Env: []corev1.EnvVar{{Name: "OWN", Value: "1"}}}, {Name: "side", Image: "envoy"}},
	}}
	jobPod := *pod.DeepCopy()
	jobPod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	meta := metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels}
	sel := &metav1.LabelSelector{MatchLabels: labels}
	at := func(path ...string) func(*unstructured.Unstructured) (*corev1.PodSpec, error) {
		return func(u *unstructured.Unstructured) (*corev1.PodSpec, error) {
			m, _, err := unstructured.NestedMap(u.Object, path...)
			if err != nil {
				return nil, err
			}
			ps := &corev1.PodSpec{}
			return ps, runtime.DefaultUnstructuredConverter.FromUnstructured(m, ps)
		}
	}
	tmpl := at("spec", "template", "spec")
	type entry = struct {
		obj     runtime.Object
		podSpec func(*unstructured.Unstructured) (*corev1.PodSpec, error)
	}
	return map[string]entry{
		"apps/v1 Deployment":  {&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: sel, Template: pod}}, tmpl},
		"apps/v1 StatefulSet": {&appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: sel, Template: pod}}, tmpl},
		"apps/v1 DaemonSet":   {&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: pod}}, tmpl},
		"apps/v1 ReplicaSet":  {&appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}, ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: pod}}, tmpl},
		"batch/v1 Job":        {&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: meta, Spec: batchv1.JobSpec{Template: jobPod}}, tmpl},
		"batch/v1 CronJob": {&batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobPod}}}}, at("spec", "jobTemplate", "spec", "template", "spec")},
		"v1 Pod": {&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: pod.Spec}, at("spec")},
	}
}

// TestMutatingPolicyMatchesDerivedDoOnEveryShapeWithRealAPIServer programs
// the mutating policy of a declarative kind, with no webhook anywhere, and
// checks for every built-in shape, by server-side dry-run creates: the
// object is bound in the Binding's namespace exactly as the derived Do
// binds it (the pod spec the server returns equals Do applied to the pod
// spec it returns without the policy); in another namespace and with the
// exclude label it is left alone; a Binding by selector binds as one by
// name.
func TestMutatingPolicyMatchesDerivedDoOnEveryShapeWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"decl-a", "decl-b", "decl-sel"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	opts := policy.MutatingPolicyOptions{Resource: envBindings, Kind: "EnvBinding"}
	declared := createPolicy(t, kube, opts)
	shapes := shapeObjects("x")
	for shapeName, s := range shapes {
		u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(s.obj)
		apiVersion, kind := u["apiVersion"].(string), u["kind"].(string)
		createBinding(t, dyn, "decl-a", "by-name-"+bindingName(shapeName), map[string]any{"apiVersion": apiVersion, "kind": kind, "name": "web"}, declared)
		bindPolicy(t, kube, opts, policy.BindingRef{Namespace: "decl-a", Name: "by-name-" + bindingName(shapeName)})
		createBinding(t, dyn, "decl-sel", "by-selector-"+bindingName(shapeName), map[string]any{"apiVersion": apiVersion, "kind": kind,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, declared)
		bindPolicy(t, kube, opts, policy.BindingRef{Namespace: "decl-sel", Name: "by-selector-" + bindingName(shapeName),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	}

	dryCreate := func(ns string, obj runtime.Object, extraLabels map[string]string) (*unstructured.Unstructured, error) {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		in := &unstructured.Unstructured{Object: u}
		in.SetNamespace(ns)
		labels := in.GetLabels()
		for k, v := range extraLabels {
			labels[k] = v
		}
		in.SetLabels(labels)
		gvk := in.GroupVersionKind()
		mapping, err := restMapping(kube, gvk)
		if err != nil {
			return nil, err
		}
		return dyn.Resource(mapping).Namespace(ns).Create(ctx, in, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	want := func(t *testing.T, base *corev1.PodSpec) *corev1.PodSpec {
		wp := &duck.WithPod{}
		wp.Spec.Template.Spec = *base.DeepCopy()
		declaredSpec.Do(wp)
		return &wp.Spec.Template.Spec
	}
	// The kube-apiserver loads each policy binding, and the Binding it
	// names as its parameter, on its own; wait until every one is in
	// force, or a shape compared early reads a binding not loaded yet.
	poll(t, "the policy to bind every shape by name and by selector", func() (bool, error) {
		for _, s := range shapes {
			for _, ns := range []string{"decl-a", "decl-sel"} {
				got, err := dryCreate(ns, s.obj, nil)
				if err != nil {
					return false, err
				}
				ps, err := s.podSpec(got)
				if err != nil || len(ps.Volumes) == 0 {
					return false, err
				}
			}
		}
		return true, nil
	})
	for shapeName, s := range shapes {
		t.Run(shapeName, func(t *testing.T) {
			baseObj, err := dryCreate("decl-b", s.obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			base, err := s.podSpec(baseObj)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name, ns string
				labels   map[string]string
				want     *corev1.PodSpec
			}{
				{"by name", "decl-a", nil, want(t, base)},
				{"by selector", "decl-sel", nil, want(t, base)},
				{"excluded", "decl-a", map[string]string{policy.ExcludeLabel: "true"}, base},
			} {
				got, err := dryCreate(tc.ns, s.obj, tc.labels)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				ps, err := s.podSpec(got)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, ps); diff != "" {
					t.Errorf("%s: pod spec through the policy vs derived Do (-do +policy):\n%s", tc.name, diff)
				}
			}
		})
	}
}

func createBinding(t testing.TB, dyn dynamic.Interface, ns, name string, subject, declared map[string]any) {
	t.Helper()
	ctx := t.Context()
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": envBindings.GroupVersion().String(), "kind": "EnvBinding",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"subject": subject},
	}}
	got, err := dyn.Resource(envBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create EnvBinding %s/%s: %v", ns, name, err)
	}
	got.Object["status"] = map[string]any{"declared": declared, "declaredGeneration": got.GetGeneration()}
	if _, err := dyn.Resource(envBindings).Namespace(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("publish declared spec of EnvBinding %s/%s: %v", ns, name, err)
	}
}

func restMapping(kube kubernetes.Interface, gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	resources, err := kube.Discovery().ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	for _, r := range resources.APIResources {
		if r.Kind == gvk.Kind && !containsSlash(r.Name) {
			return gvk.GroupVersion().WithResource(r.Name), nil
		}
	}
	return schema.GroupVersionResource{}, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group}, gvk.Kind)
}

func containsSlash(s string) bool {
	for _, c := range s {
		if c == '/' {
			return true
		}
	}
	return false
}

func bindingName(shape string) string {
	out := []rune{}
	for _, c := range strings.ToLower(shape) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			out = append(out, c)
		} else {
			out = append(out, '-')
		}
	}
	return string(out)
}

func ptrTo[T any](v T) *T { return &v }

// createPolicy creates the mutating policy opts describe and returns
// declaredSpec as a Binding publishes it.
func createPolicy(t testing.TB, kube kubernetes.Interface, opts policy.MutatingPolicyOptions) (declared map[string]any) {
	t.Helper()
	m, err := policy.MutatingPolicy(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(t.Context(), m, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingAdmissionPolicy %s: %v", m.Name, err)
	}
	declared, err = runtime.DefaultUnstructuredConverter.ToUnstructured(&declaredSpec)
	if err != nil {
		t.Fatal(err)
	}
	return declared
}

// bindPolicy creates the policy's binding for the Binding ref names, as
// the process's BindingSet does.
func bindPolicy(t testing.TB, kube kubernetes.Interface, opts policy.MutatingPolicyOptions, ref policy.BindingRef) {
	t.Helper()
	b, err := policy.MutatingPolicyBinding(opts, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingAdmissionPolicyBinding %s: %v", b.Name, err)
	}
}

// TestMutatingPolicyCarriesServerDefaults creates the policy and its
// binding as MutatingPolicy builds them, with every option that shapes
// them, and checks that the kube-apiserver stores the same specs: a
// default it fills in and the builder does not would make the Reconciler
// restore the objects for ever.
func TestMutatingPolicyCarriesServerDefaults(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	api := kubernetes.NewForConfigOrDie(env.Config).AdmissionregistrationV1()
	for i, opts := range []policy.MutatingPolicyOptions{
		{Resource: envBindings, Kind: "EnvBinding", Name: "defaults-plain"},
		{Resource: envBindings, Kind: "EnvBinding", Name: "defaults-scoped", ExcludedNamespaces: []string{"kube-system", "bindkit-system"}, Inclusion: true, SkipPatchesBy: "envbinding-controller"},
	} {
		m, err := policy.MutatingPolicy(opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := policy.MutatingPolicyBinding(opts, policy.BindingRef{Namespace: "defaults", Name: "env", Selector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		gotM, err := api.MutatingAdmissionPolicies().Create(ctx, m, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("options %d: create policy: %v", i, err)
		}
		gotB, err := api.MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("options %d: create binding: %v", i, err)
		}
		// As the Reconciler compares (equality.Semantic): empty and nil
		// lists and maps are the same.
		if diff := cmp.Diff(m.Spec, gotM.Spec, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("options %d: policy spec (-built +stored):\n%s", i, diff)
		}
		if diff := cmp.Diff(b.Spec, gotB.Spec, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("options %d: binding spec (-built +stored):\n%s", i, diff)
		}
	}
}
