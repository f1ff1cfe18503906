package psbinding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

func (h *harness) createBindingIn(t *testing.T, ns, name string, subject tracker.Reference, envName, value string) {
	t.Helper()
	b := newEnvBinding(ns, name, subject, envName, value)
	if _, err := h.dyn.Resource(envBindingsGVR).Namespace(ns).Create(context.Background(), toUnstructured(t, b), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create binding %s/%s: %v", ns, name, err)
	}
}

func (h *harness) createDeploymentIn(t *testing.T, ns, name string, labels map[string]string) *appsv1.Deployment {
	t.Helper()
	d := testDeployment(ns, name, labels)
	d.ResourceVersion = ""
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}}
	d.Spec.Template.Labels = map[string]string{"pod": name}
	created, err := h.kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, name, err)
	}
	return created
}

func (h *harness) deploymentIn(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := h.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment %s/%s: %v", ns, name, err)
	}
	return d
}

func (h *harness) bindingIn(t *testing.T, ns, name string) *envBinding {
	t.Helper()
	u, err := h.dyn.Resource(envBindingsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get binding %s/%s: %v", ns, name, err)
	}
	b, err := toEnvBinding(u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// untouched fails t when the deployment changed since it was created: its
// generation moved, or it carries an env var or a record.
func untouched(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if d.Generation != 1 || len(envOf(&d.Spec.Template.Spec)) != 0 || d.Annotations[duck.BoundAnnotation] != "" {
		t.Errorf("deployment %s/%s was changed: generation %d, env %v, record %q",
			d.Namespace, d.Name, d.Generation, envOf(&d.Spec.Template.Spec), d.Annotations[duck.BoundAnnotation])
	}
}

// A Binding whose subject names another namespace, by name or by selector,
// changes nothing there on either path, whatever its CRD allows (the
// EnvBinding CRD has no validation of the subject), and says why.
func TestCrossNamespaceSubjectRefusedOnBothPathsWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	other := env.CreateNamespace(t, "other-")
	h := startHarness(t, withNamespaces(other))
	web := map[string]string{"app": "web"}
	h.createDeploymentIn(t, other, "victim", web)
	// A legitimate Binding in the other namespace makes the webhook act
	// there; it selects nothing.
	h.createBindingIn(t, other, "local", deploymentRef(other, "", matchLabels("app", "nothing")), "LOCAL", "l")
	h.createBinding(t, "reach-by-name", deploymentRef(other, "victim", nil), "TOKEN", "t")
	h.createBinding(t, "reach-by-selector", deploymentRef(other, "", &metav1.LabelSelector{MatchLabels: web}), "TOKEN", "t")

	for _, name := range []string{"reach-by-name", "reach-by-selector"} {
		b := h.waitReady(t, name, readyCondition{"False", ReasonSubjectOutsideNamespace})
		msg := readyOf(b).Message
		if !strings.Contains(msg, `"`+other+`"`) || !strings.Contains(msg, `"`+h.ns+`"`) {
			t.Errorf("%s: message %q does not name both namespaces", name, msg)
		}
	}
	eventually(t, "local binding in force", func() (string, error) {
		if got := ready(h.bindingIn(t, other, "local")); got != (readyCondition{"True", duck.ReasonBindingAvailable}) {
			return fmt.Sprint(got), nil
		}
		return "", nil
	})
	// Admission in the other namespace is in force (the local Binding's
	// env would be added to a match) ...
	h.createBindingIn(t, other, "probe", deploymentRef(other, "", matchLabels("probe", "yes")), "PROBE", "p")
	eventually(t, "webhook in force in "+other, func() (string, error) {
		d := testDeployment(other, "p", map[string]string{"probe": "yes"})
		d.ResourceVersion = ""
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "p"}}
		d.Spec.Template.Labels = map[string]string{"pod": "p"}
		got, err := h.kube.AppsV1().Deployments(other).Create(context.Background(), d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return "", err
		}
		if len(envOf(&got.Spec.Template.Spec)) == 0 {
			return "not mutated yet", nil
		}
		return "", nil
	})
	// ... and yet a new subject there that the reaching Bindings select is
	// created untouched.
	untouched(t, h.createDeploymentIn(t, other, "victim-2", web))
	untouched(t, h.deploymentIn(t, other, "victim"))

	// Never bound, they go without unbinding anything.
	for _, name := range []string{"reach-by-name", "reach-by-selector"} {
		h.deleteBinding(t, name)
		h.waitDeleted(t, name)
	}
	untouched(t, h.deploymentIn(t, other, "victim"))
}

func readyOf(b *envBinding) metav1.Condition {
	if c := b.Status.GetCondition(duck.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// The exclude label keeps a subject, or every subject of a namespace, away
// from both paths. A subject excluded after it was bound is left as it is,
// and stays so when its Binding goes.
func TestExcludedSubjectsUntouchedOnBothPathsWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	excludedNS := env.CreateNamespace(t, "excluded-")
	h := startHarness(t, withNamespaces(excludedNS))
	if _, err := h.kube.CoreV1().Namespaces().Patch(context.Background(), excludedNS, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, ExcludeLabel), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	web := map[string]string{"app": "web"}
	excluded := map[string]string{"app": "web", ExcludeLabel: "true"}
	h.createDeployment(t, "in", web)
	h.createDeployment(t, "out", excluded)
	h.createDeployment(t, "later-out", web)
	h.createDeploymentIn(t, excludedNS, "in-excluded-ns", web)
	h.createBinding(t, "gh", deploymentRef(h.ns, "", &metav1.LabelSelector{MatchLabels: web}), "TOKEN", "t")
	h.createBindingIn(t, excludedNS, "gh", deploymentRef(excludedNS, "", &metav1.LabelSelector{MatchLabels: web}), "TOKEN", "t")

	h.waitDeploymentEnv(t, "in", []corev1.EnvVar{token})
	h.waitDeploymentEnv(t, "later-out", []corev1.EnvVar{token})
	h.waitReady(t, "gh", readyCondition{"True", duck.ReasonBindingAvailable})
	eventually(t, "binding in the excluded namespace says why", func() (string, error) {
		if got := ready(h.bindingIn(t, excludedNS, "gh")); got != (readyCondition{"False", ReasonNamespaceExcluded}) {
			return fmt.Sprint(got), nil
		}
		return "", nil
	})
	untouched(t, h.deployment(t, "out"))
	untouched(t, h.deploymentIn(t, excludedNS, "in-excluded-ns"))

	// Admission: a new excluded subject, and a new subject in the excluded
	// namespace, are created untouched while a plain one is bound.
	h.waitAdmission(t, h.deploymentProbe("probe", token))
	untouched(t, h.createDeployment(t, "new-out", excluded))
	untouched(t, h.createDeploymentIn(t, excludedNS, "new-in-excluded-ns", web))

	// Excluded after it was bound: left bound, then left as it is when the
	// Binding goes.
	d := h.deployment(t, "later-out")
	d.Labels[ExcludeLabel] = "true"
	if _, err := h.kube.AppsV1().Deployments(h.ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCachedLabel(t, "later-out", ExcludeLabel, "true")
	h.deleteBinding(t, "gh")
	h.waitDeploymentEnv(t, "in", nil)
	h.waitDeleted(t, "gh")
	if env := envOf(&h.deployment(t, "later-out").Spec.Template.Spec); !slices.Contains(env, token) {
		t.Errorf("a subject excluded after binding was unbound: env %v", env)
	}
}

// Two Bindings of one kind write the same field over disjoint selectors,
// with no webhook in force: neither undoes the other's work, however often
// either reconciles.
func TestSameKindBindingsDoNotUndoEachOtherWithRealAPIServer(t *testing.T) {
	h := startHarness(t, withoutWebhook())
	h.createDeployment(t, "a1", map[string]string{"team": "a"})
	h.createDeployment(t, "b1", map[string]string{"team": "b"})
	h.createBinding(t, "a", deploymentRef(h.ns, "", matchLabels("team", "a")), "TOKEN", "for-a")
	h.createBinding(t, "b", deploymentRef(h.ns, "", matchLabels("team", "b")), "TOKEN", "for-b")
	h.waitDeploymentEnv(t, "a1", []corev1.EnvVar{{Name: "TOKEN", Value: "for-a"}})
	h.waitDeploymentEnv(t, "b1", []corev1.EnvVar{{Name: "TOKEN", Value: "for-b"}})
	h.waitReady(t, "a", readyCondition{"True", duck.ReasonBindingAvailable})
	h.waitReady(t, "b", readyCondition{"True", duck.ReasonBindingAvailable})
	before := map[string]int64{"a1": h.deployment(t, "a1").Generation, "b1": h.deployment(t, "b1").Generation}
	for range 3 {
		h.reconciler.EnqueueKey(h.ns + "/a")
		h.reconciler.EnqueueKey(h.ns + "/b")
		time.Sleep(500 * time.Millisecond)
	}
	for name, gen := range before {
		if got := h.deployment(t, name).Generation; got != gen {
			t.Errorf("%s: generation moved from %d to %d: the Bindings fight", name, gen, got)
		}
	}
	h.waitDeploymentEnv(t, "a1", []corev1.EnvVar{{Name: "TOKEN", Value: "for-a"}})
	h.waitDeploymentEnv(t, "b1", []corev1.EnvVar{{Name: "TOKEN", Value: "for-b"}})
}

func (h *harness) updateBinding(t *testing.T, name string, change func(*envBinding)) {
	t.Helper()
	eventually(t, "update binding "+name, func() (string, error) {
		b := h.bindingIn(t, h.ns, name)
		change(b)
		_, err := h.dyn.Resource(envBindingsGVR).Namespace(h.ns).Update(context.Background(), toUnstructured(t, b), metav1.UpdateOptions{})
		if err != nil {
			return err.Error(), nil
		}
		return "", nil
	})
}

// What a Binding bound is unbound when it no longer names it: relabelled,
// the selector changed, the kind changed.
func TestUnbindWhatIsNoLongerNamedWithRealAPIServer(t *testing.T) {
	h := startHarness(t, withoutWebhook())
	h.createDeployment(t, "old-1", map[string]string{"app": "old"})
	h.createDeployment(t, "old-2", map[string]string{"app": "old"})
	h.createDeployment(t, "new", map[string]string{"app": "new"})
	h.createBinding(t, "gh", deploymentRef(h.ns, "", matchLabels("app", "old")), "TOKEN", "t")
	h.waitDeploymentEnv(t, "old-1", []corev1.EnvVar{token})
	h.waitDeploymentEnv(t, "old-2", []corev1.EnvVar{token})

	// Relabelled out of the selection.
	d := h.deployment(t, "old-2")
	d.Labels["app"] = "retired"
	if _, err := h.kube.AppsV1().Deployments(h.ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitDeploymentEnv(t, "old-2", nil)

	// The selector moves.
	h.updateBinding(t, "gh", func(b *envBinding) { b.Spec.Subject.Selector = matchLabels("app", "new") })
	h.waitDeploymentEnv(t, "new", []corev1.EnvVar{token})
	h.waitDeploymentEnv(t, "old-1", nil)

	// The kind moves: every Deployment it bound is unbound.
	h.updateBinding(t, "gh", func(b *envBinding) {
		b.Spec.Subject = tracker.Reference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	})
	h.waitDeploymentEnv(t, "new", nil)
	eventually(t, "kinds record", func() (string, error) {
		if got := h.bindingIn(t, h.ns, "gh").Annotations[SubjectKindsAnnotation]; got != "apps/v1/StatefulSet" {
			return got, nil
		}
		return "", nil
	})
}

// A Binding deleted while the controller is down still unbinds everything
// it bound once the controller is back.
func TestDeletedWhileControllerDownWithRealAPIServer(t *testing.T) {
	h := startHarness(t, withoutWebhook())
	h.createDeployment(t, "web-1", map[string]string{"app": "web"})
	h.createDeployment(t, "web-2", map[string]string{"app": "web"})
	h.createBinding(t, "gh", deploymentRef(h.ns, "", matchLabels("app", "web")), "TOKEN", "t")
	h.waitDeploymentEnv(t, "web-1", []corev1.EnvVar{token})
	h.waitDeploymentEnv(t, "web-2", []corev1.EnvVar{token})

	h.stopController()
	h.deleteBinding(t, "gh")
	// Relabelled while nobody watched: it still records the Binding.
	d := h.deployment(t, "web-2")
	d.Labels["app"] = "moved"
	if _, err := h.kube.AppsV1().Deployments(h.ns).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.restart(t)
	h.waitDeploymentEnv(t, "web-1", nil)
	h.waitDeploymentEnv(t, "web-2", nil)
	h.waitDeleted(t, "gh")
}

// Once every Binding is in force, reconciling them all again (a resync)
// sends no request at all for their subjects.
func TestSteadyStateResyncSendsNothingWithRealAPIServer(t *testing.T) {
	h := startHarness(t, withoutWebhook())
	for i := range 20 {
		h.createDeployment(t, fmt.Sprintf("web-%02d", i), map[string]string{"app": "web"})
	}
	h.createBinding(t, "by-selector", deploymentRef(h.ns, "", matchLabels("app", "web")), "TOKEN", "t")
	h.createBinding(t, "by-name", deploymentRef(h.ns, "web-00", nil), "NAMED", "n")
	h.waitReady(t, "by-selector", readyCondition{"True", duck.ReasonBindingAvailable})
	h.waitReady(t, "by-name", readyCondition{"True", duck.ReasonBindingAvailable})
	for i := range 20 {
		eventually(t, "bound", func() (string, error) {
			if env := envOf(&h.deployment(t, fmt.Sprintf("web-%02d", i)).Spec.Template.Spec); !slices.Contains(env, token) {
				return fmt.Sprint(env), nil
			}
			return "", nil
		})
	}
	// The reconciles the last patches caused (their events reach the
	// cache when they do): wait for a whole second with no request.
	eventually(t, "a second with no request from the reconciler", func() (string, error) {
		quiet := h.requests.mark()
		time.Sleep(time.Second)
		if sent := h.requests.since(quiet); len(sent) > 0 {
			return fmt.Sprint(sent), nil
		}
		return "", nil
	})
	mark := h.requests.mark()
	for range 3 {
		h.reconciler.EnqueueKey(h.ns + "/by-selector")
		h.reconciler.EnqueueKey(h.ns + "/by-name")
		time.Sleep(300 * time.Millisecond)
	}
	if diff := cmp.Diff([]string(nil), h.requests.since(mark), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("requests sent by resyncs of Bindings in force (-want +got):\n%s", diff)
	}
}
