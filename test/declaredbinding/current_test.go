package declaredbinding_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/declaredbinding/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

// TestAdmissionFollowsTheBindingAsItIsNow, on a kind written as the README
// tells an author (its Spec in the Binding), its process admitting by
// webhook over three running Deployments and a Binding that rolls out one
// at a time: a Deployment created once the rollout completed comes back
// bound at that generation; an edit that changes no template writes no
// Deployment and is in force at once; with the process stopped (its
// webhook hands the kind to the policy as it goes), an edit is carried by
// the next create, a Deployment's and a Job's, recorded at the edit's
// generation; the audit, with a process again, finds nothing.
func TestAdmissionFollowsTheBindingAsItIsNow(t *testing.T) {
	r := newRig(t, "now-")
	for _, name := range []string{"app-0", "app-1", "app-2"} {
		r.deployment(name, "")
	}
	r.waitRolledOut(3)
	p := r.start(policy.ByWebhook, 0)
	spec := v1alpha1.DeclaredBindingSpec{
		Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Declare: declarative.Spec{Env: []corev1.EnvVar{{Name: "X", Value: "1"}}},
	}
	b := &v1alpha1.DeclaredBinding{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "paced", Annotations: map[string]string{psbinding.RolloutMaxChangingAnnotation: "1"}}, Spec: spec}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	created := r.create(&unstructured.Unstructured{Object: content})
	by := duck.BoundBy{Resource: v1alpha1.GroupVersionResource().GroupResource(), Name: "paced", UID: created.GetUID()}
	r.waitComplete("paced", 1)
	late := r.deployment("late", "1")
	if x, gen := xOfDeployment(late), boundGeneration(late, by); x != "1" || gen != 1 {
		t.Errorf("Deployment late, created once generation 1 rolled out: X=%q at generation %d, want 1 at 1", x, gen)
	}

	// An edit that changes no template: the subject's namespace written out.
	before := r.deployments()
	r.patch("paced", fmt.Sprintf(`{"spec":{"subject":{"namespace":%q}}}`, r.ns))
	r.waitComplete("paced", 2)
	time.Sleep(2 * time.Second) // any write the reconciler would make
	for name, d := range r.deployments() {
		if was := before[name]; d.Generation != was.Generation || d.Annotations[duck.BoundAnnotation] != was.Annotations[duck.BoundAnnotation] {
			t.Errorf("Deployment %s written by an edit that changes no template: generation %d (was %d), bound %q (was %q)",
				name, d.Generation, was.Generation, d.Annotations[duck.BoundAnnotation], was.Annotations[duck.BoundAnnotation])
		}
	}

	// No process: an edit is carried by the next creates, at its
	// generation (a paced generation reaches no new subject before its
	// waves: the pacing goes first; and a Binding of Jobs, which are
	// bound at admission or never).
	r.binding("jobs", "1")
	r.waitBound("the Binding of Jobs to bind", "1")
	r.patch("paced", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, psbinding.RolloutMaxChangingAnnotation))
	p.stop(t)
	r.patch("paced", `{"spec":{"declare":{"env":[{"name":"X","value":"3"}]}}}`)
	r.patch("jobs", `{"spec":{"declare":{"env":[{"name":"X","value":"3"}]}}}`)
	r.waitBound("a Job created with no process to carry the edit", "3")
	job, err := r.kube.BatchV1().Jobs(r.ns).Create(t.Context(), r.job("no-process"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobsBy := duck.BoundBy{Resource: by.Resource, Name: "jobs", UID: r.uid("jobs")}
	if gen := boundGeneration(job, jobsBy); xOf(job) != "3" || gen != 2 {
		t.Errorf("Job created with no process: X=%q at generation %d, want 3 at 2", xOf(job), gen)
	}
	d := r.deployment("no-process", "3")
	if x, gen := xOfDeployment(d), boundGeneration(d, by); x != "3" || gen != 3 {
		t.Errorf("Deployment created with no process: X=%q at generation %d, want 3 at 3", x, gen)
	}
	r.start(policy.ByPolicy, 0)
	r.waitComplete("paced", 3)
	bindingtest.Audit(t, r.env, bindingtest.AuditOptions{Namespace: r.ns})
}

// deployment creates a one-replica Deployment labelled app=web; when x is
// set, it first polls a dry run until admission gives it X=x (the
// kube-apiserver loads what admission reads some time after it is
// written). It returns what the API server stored.
func (r *rig) deployment(name, x string) *appsv1.Deployment {
	r.t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}}}
	if x != "" {
		r.poll("admission to bind Deployment "+name, func() (string, error) {
			got, err := r.kube.AppsV1().Deployments(r.ns).Create(r.t.Context(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return err.Error(), nil
			}
			if got := xOfDeployment(got); got != x {
				return fmt.Sprintf("X=%q", got), nil
			}
			return "", nil
		})
	}
	got, err := r.kube.AppsV1().Deployments(r.ns).Create(r.t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

// waitRolledOut waits until n Deployments of the namespace have rolled out.
func (r *rig) waitRolledOut(n int) {
	r.t.Helper()
	r.poll(fmt.Sprintf("%d Deployments to roll out", n), func() (string, error) {
		done := 0
		for _, d := range r.deployments() {
			if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 {
				done++
			}
		}
		return map[bool]string{true: "", false: fmt.Sprintf("%d rolled out", done)}[done >= n], nil
	})
}

// waitComplete waits until the Binding is Ready at generation gen, and,
// while a rollout policy paces it, its rollout complete.
func (r *rig) waitComplete(name string, gen int64) {
	r.t.Helper()
	r.poll(fmt.Sprintf("generation %d of %s in force", gen, name), func() (string, error) {
		u, err := r.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(r.ns).Get(r.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		var b v1alpha1.DeclaredBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			return "", err
		}
		c := b.Status.GetCondition(duck.ConditionReady)
		_, paced := b.Annotations[psbinding.RolloutMaxChangingAnnotation]
		if b.Generation != gen || b.Status.ObservedGeneration != gen || c == nil || c.Status != metav1.ConditionTrue || (paced && !b.Status.Rollout.Complete(gen)) {
			return fmt.Sprintf("generation %d, observed %d, Ready %+v, rollout %+v", b.Generation, b.Status.ObservedGeneration, c, b.Status.Rollout), nil
		}
		return "", nil
	})
}

// patch merge-patches the Binding, retrying a refusal as unavailable as
// create does (the kube-apiserver's admission policies may not know the
// CRD's kind yet).
func (r *rig) patch(name, patch string) {
	r.t.Helper()
	r.poll("DeclaredBinding "+name+" to be patched", func() (string, error) {
		_, err := r.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(r.ns).Patch(r.t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if apierrors.IsServiceUnavailable(err) {
			return err.Error(), nil
		}
		return "", err
	})
}

// deployments lists the namespace's Deployments by name.
func (r *rig) deployments() map[string]*appsv1.Deployment {
	r.t.Helper()
	list, err := r.kube.AppsV1().Deployments(r.ns).List(r.t.Context(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// xOfDeployment is the value of X in a Deployment's container.
func xOfDeployment(d *appsv1.Deployment) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "X" {
			return e.Value
		}
	}
	return ""
}

// boundGeneration is the generation obj records of by, 0 if none.
func boundGeneration(obj metav1.Object, by duck.BoundBy) int64 {
	gen, _ := duck.BoundGeneration(obj.GetAnnotations(), by)
	return gen
}

// uid is the Binding's UID.
func (r *rig) uid(name string) types.UID {
	r.t.Helper()
	u, err := r.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(r.ns).Get(r.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return u.GetUID()
}
