package policy_test

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// TestMutatingAdmissionPolicyShapeWithRealAPIServer checks, on the minor
// under test, the facts the policy path of declarative Bindings rests on:
// MutatingAdmissionPolicy v1 is served by default; one policy per Binding
// kind with the Binding as its paramKind and one binding whose paramRef
// selects every Binding of the object's own namespace (so the number of
// objects does not grow with the number of Bindings, and a Binding never
// reaches another namespace) applies a CEL-built apply configuration to
// every container of a Deployment and of a CronJob (its template under
// jobTemplate); and an object labelled with the exclude label is left alone
// by a match condition.
func TestMutatingAdmissionPolicyShapeWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)

	resources, err := kube.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range resources.APIResources {
		served[r.Name] = true
	}
	if !served["mutatingadmissionpolicies"] || !served["mutatingadmissionpolicybindings"] {
		t.Fatalf("admissionregistration.k8s.io/v1 does not serve MutatingAdmissionPolicy on this minor; serves %v", served)
	}

	for _, ns := range []string{"probe-a", "probe-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := dyn.Resource(githubBindings).Namespace("probe-a").Create(ctx, githubBinding("probe-a", "gh", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// containers is the CEL apply configuration adding the Binding's env
	// entry to every container of the pod spec at path (a CEL type path
	// and the matching object path).
	containers := func(typePath, objPath string) string {
		return "params.spec.subject.name != object.metadata.name ? Object{} : " +
			nest(typePath, "containers: "+objPath+".containers.map(c, Object."+typePath+".containers{name: c.name, "+
				"env: [Object."+typePath+".containers.env{name: 'GITHUB_SECRET', value: params.spec.secret.name}]})")
	}
	fail, never := admissionregistrationv1.Fail, admissionregistrationv1.IfNeededReinvocationPolicy
	for _, p := range []struct{ name, group, resource, typePath, objPath string }{
		{"probe-deployments", "apps", "deployments", "spec.template.spec", "object.spec.template.spec"},
		{"probe-cronjobs", "batch", "cronjobs", "spec.jobTemplate.spec.template.spec", "object.spec.jobTemplate.spec.template.spec"},
	} {
		m := &admissionregistrationv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				ParamKind: &admissionregistrationv1.ParamKind{APIVersion: githubBindings.GroupVersion().String(), Kind: "GithubBinding"},
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{p.group}, APIVersions: []string{"v1"}, Resources: []string{p.resource}},
					},
				}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{
					Name:       "not-excluded",
					Expression: "!has(object.metadata.labels) || !('bindings.bindkit.dev/exclude' in object.metadata.labels) || object.metadata.labels['bindings.bindkit.dev/exclude'] != 'true'",
				}},
				Mutations: []admissionregistrationv1.Mutation{{
					PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: containers(p.typePath, p.objPath)},
				}},
				FailurePolicy:      &fail,
				ReinvocationPolicy: never,
			},
		}
		if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create MutatingAdmissionPolicy %s: %v", p.name, err)
		}
		allow := admissionregistrationv1.AllowAction
		mb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
				PolicyName: p.name,
				// No namespace: the Bindings of the object's own namespace.
				ParamRef: &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: &allow},
			},
		}
		if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, mb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create MutatingAdmissionPolicyBinding %s: %v", p.name, err)
		}
	}

	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{
			{Name: "app", Image: "nginx"}, {Name: "side", Image: "envoy"}}},
	}
	deployment := func(ns string, labels map[string]string) *appsv1.Deployment {
		p := *pod.DeepCopy()
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels},
			Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: p},
		}
	}
	envOf := func(cs []corev1.Container) string {
		var out []string
		for _, c := range cs {
			var e []string
			for _, v := range c.Env {
				e = append(e, v.Name+"="+v.Value)
			}
			out = append(out, c.Name+"["+strings.Join(e, ",")+"]")
		}
		return strings.Join(out, " ")
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	const bound = "app[GITHUB_SECRET=token] side[GITHUB_SECRET=token]"
	cases := []struct {
		name, want string
		create     func() ([]corev1.Container, error)
	}{
		{"deployment in the Binding's namespace", bound, func() ([]corev1.Container, error) {
			d, err := kube.AppsV1().Deployments("probe-a").Create(ctx, deployment("probe-a", nil), dry)
			if err != nil {
				return nil, err
			}
			return d.Spec.Template.Spec.Containers, nil
		}},
		{"deployment in another namespace", "app[] side[]", func() ([]corev1.Container, error) {
			d, err := kube.AppsV1().Deployments("probe-b").Create(ctx, deployment("probe-b", nil), dry)
			if err != nil {
				return nil, err
			}
			return d.Spec.Template.Spec.Containers, nil
		}},
		{"excluded deployment", "app[] side[]", func() ([]corev1.Container, error) {
			d, err := kube.AppsV1().Deployments("probe-a").Create(ctx, deployment("probe-a", map[string]string{"bindings.bindkit.dev/exclude": "true"}), dry)
			if err != nil {
				return nil, err
			}
			return d.Spec.Template.Spec.Containers, nil
		}},
		{"cronjob", bound, func() ([]corev1.Container, error) {
			cj := &batchv1.CronJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: "probe-a", Name: "web"},
				Spec:       batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *pod.DeepCopy()}}},
			}
			got, err := kube.BatchV1().CronJobs("probe-a").Create(ctx, cj, dry)
			if err != nil {
				return nil, err
			}
			return got.Spec.JobTemplate.Spec.Template.Spec.Containers, nil
		}},
	}
	// Each policy is loaded by the kube-apiserver on its own: wait until
	// both bind (the Deployment's and the CronJob's) before comparing.
	poll(t, "the policies to bind a Deployment and a CronJob at admission", func() (bool, error) {
		for _, tc := range cases {
			if tc.want != bound {
				continue
			}
			cs, err := tc.create()
			if err != nil || envOf(cs) != bound {
				return false, err
			}
		}
		return true, nil
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := tc.create()
			if err != nil {
				t.Fatal(err)
			}
			if got := envOf(cs); got != tc.want {
				t.Errorf("containers after admission: %s, want %s", got, tc.want)
			}
		})
	}
}

// nest wraps inner in the CEL object constructors of typePath
// ("spec.template.spec" gives Object{spec: Object.spec{template: ...}}).
func nest(typePath, inner string) string {
	fields := strings.Split(typePath, ".")
	out := inner
	for i := len(fields) - 1; i >= 0; i-- {
		out = fields[i] + ": Object." + strings.Join(fields[:i+1], ".") + "{" + out + "}"
	}
	return "Object{" + out + "}"
}
