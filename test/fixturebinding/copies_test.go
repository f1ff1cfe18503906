package fixturebinding_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/bindkit/bindkit/test/fixturebinding"
)

// A Binding whose Do changes its own Binding (it appends localhost to its
// spec's NoProxy list before setting NO_PROXY from it) admits every edit
// of a workload with the same pod template: through sharedmain with the
// fixture kinds, controller and webhook, against the real kube-apiserver,
// a Deployment bound at its creation is edited ten times (a label of its
// own, so each edit is an admitted UPDATE that runs Do, and one that
// leaves a Deployment's generation alone; an annotation does not), and after
// each its template is the one it was created with (NO_PROXY one
// localhost long, metadata.generation unchanged: no rollout). A
// Deployment created after the edits, and one the reconciler binds, get
// the same NO_PROXY: the Binding in the process's informer, which every
// admission reads, is as the API server stores it. Before admission gave
// Do a copy of its own, NO_PROXY grew by one localhost at every edit.
func TestDoThatChangesItsBindingLeavesTheCacheAloneWithRealAPIServer(t *testing.T) {
	r := newRig(t)
	ns := r.env.CreateNamespace(t, "copies-")
	spec := fixturebinding.Spec{NoProxy: []string{"10.0.0.0/8"}}
	r.binding(fixturebinding.Kind, ns, "proxy", "web", spec)
	want := corev1.EnvVar{Name: fixturebinding.NoProxyEnv, Value: "10.0.0.0/8,localhost"}
	web := map[string]string{"app": "web"}
	r.waitAdmission(ns, "probe", web, boundBy(fixturebinding.Kind, "proxy"))

	created, err := r.deployment(ns, "web", web)
	if err != nil {
		t.Fatal(err)
	}
	if got := noProxyOf(created); got != want.Value {
		t.Errorf("created with %s=%q, want %q", want.Name, got, want.Value)
	}
	deployments := r.kube.AppsV1().Deployments(ns)
	for i := range 10 {
		var edited *appsv1.Deployment
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := deployments.Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Labels["example.com/edit"] = fmt.Sprint(i + 1)
			edited, err = deployments.Update(context.Background(), d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("edit %d: %v", i+1, err)
		}
		if diff := cmp.Diff(created.Spec.Template, edited.Spec.Template); diff != "" {
			t.Fatalf("edit %d changed the pod template (-created +edited):\n%s", i+1, diff)
		}
		if edited.Generation != created.Generation {
			t.Fatalf("edit %d: generation %d, want %d (the spec did not change)", i+1, edited.Generation, created.Generation)
		}
	}

	// What the informer holds: a new subject at admission, an existing
	// one by the reconciler, both from the Binding as listed.
	late, err := r.deployment(ns, "late", web)
	if err != nil {
		t.Fatal(err)
	}
	if got := noProxyOf(late); got != want.Value {
		t.Errorf("created after the edits with %s=%q, want %q", want.Name, got, want.Value)
	}
	if _, err := r.deployment(ns, "existing", map[string]string{"app": "existing"}); err != nil {
		t.Fatal(err)
	}
	r.binding(fixturebinding.Kind, ns, "existing", "existing", spec)
	r.waitBound(ns, "existing", fixturebinding.Kind, "existing")
	existing, err := deployments.Get(context.Background(), "existing", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := noProxyOf(existing); got != want.Value {
		t.Errorf("bound by the reconciler with %s=%q, want %q", want.Name, got, want.Value)
	}
	r.running()
	r.audit(ns)
}

// noProxyOf is the NO_PROXY of the Deployment's first container.
func noProxyOf(d *appsv1.Deployment) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == fixturebinding.NoProxyEnv {
			return e.Value
		}
	}
	return ""
}
