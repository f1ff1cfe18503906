package psbinding

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/duck"
)

// normalizing is an envBinding whose Do normalizes its own spec before
// using it, the way an author trims a URL or completes a NO_PROXY list:
// it appends ",localhost" to its env var's value, in the Binding. On a
// private copy that is harmless (the copy goes); on a shared one every
// call sees the list one entry longer.
type normalizing struct {
	envBinding
	// sawWithContext is the Binding WithContext was given, when the test
	// records it.
	sawWithContext *Bindable
}

func (b *normalizing) DeepCopyObject() runtime.Object {
	return &normalizing{envBinding: *b.envBinding.DeepCopyObject().(*envBinding), sawWithContext: b.sawWithContext}
}

func (b *normalizing) Do(ctx context.Context, wp *duck.WithPod) {
	b.Spec.Env.Value += ",localhost"
	b.envBinding.Do(ctx, wp)
}

// noProxy is the NO_PROXY a normalizing Binding of value sets.
var noProxy = corev1.EnvVar{Name: "NO_PROXY", Value: "10.0.0.0/8,localhost"}

func newNormalizing(ns, name string, sel *metav1.LabelSelector) *normalizing {
	return &normalizing{envBinding: *newEnvBinding(ns, name, deploymentRef(ns, "", sel), "NO_PROXY", "10.0.0.0/8")}
}

// TestAdmitGivesAuthorCodeAPrivateCopy: admission hands WithContext and
// Do a copy of the index's Binding (the informer's object), so a Do that
// changes its Binding makes the same patch at every admitted update, and
// the Binding every later request reads is as listed.
func TestAdmitGivesAuthorCodeAPrivateCopy(t *testing.T) {
	listed := newNormalizing("ns", "proxy", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}})
	var saw Bindable
	listed.sawWithContext = &saw
	orig := listed.DeepCopyObject()
	a := admitter{withContext: func(ctx context.Context, b Bindable) (context.Context, error) {
		*b.(*normalizing).sawWithContext = b
		return ctx, nil
	}}
	a.setIndex([]Bindable{listed})
	// Each update carries what the last one was patched to: an edit of a
	// bound Deployment.
	raw := deploymentJSON(t, "ns", "web", map[string]string{"app": "web"}, noProxy)
	for i := range 5 {
		got := decide(a.admit(context.Background(), deploymentRequest(admissionv1.Update, "ns", "web", raw)))
		if diff := cmp.Diff(decision{Allowed: true}, decision{Allowed: got.Allowed, Patch: got.Patch}); diff != "" {
			t.Fatalf("update %d: Do's patch of a subject it bound (-want +got):\n%s", i+1, diff)
		}
		if saw == Bindable(listed) {
			t.Fatalf("update %d: WithContext was given the index's Binding", i+1)
		}
	}
	if diff := cmp.Diff(orig, runtime.Object(listed), cmp.AllowUnexported(normalizing{})); diff != "" {
		t.Errorf("the index's Binding after five admissions (-before +after):\n%s", diff)
	}
}

// TestReconcilerGivesEachDoAPrivateCopy: the reconciler's Do calls, one
// per subject, in parallel, each get a copy of their own: every subject
// gets the same change (with a shared copy, each saw one entry more, and
// the race detector sees the writes), and a companion from the index is
// left as listed.
func TestReconcilerGivesEachDoAPrivateCopy(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	objects := []runtime.Object{newNormalizing("ns", "proxy", sel)}
	const n = 8
	for i := range n {
		objects = append(objects, testDeployment("ns", fmt.Sprintf("web-%d", i), map[string]string{"app": "web"}))
	}
	f := newReconcilerFixture(t, objects...)
	get := f.r.Get
	f.r.Get = func(ns, name string) (Bindable, error) {
		b, err := get(ns, name)
		if err != nil {
			return nil, err
		}
		return &normalizing{envBinding: *b.(*envBinding)}, nil
	}
	f.r.PatchConcurrency = n
	companion := newNormalizing("ns", "companion", sel)
	companion.Spec.Env.Name = "COMPANION"
	companion.UID, companion.Generation = "uid-c", 1
	orig := companion.DeepCopyObject()
	f.r.Companions = func(string, string, string, string, map[string]string) []Bindable { return []Bindable{companion} }
	if err := f.r.Reconcile(context.Background(), "ns/proxy"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	for i := range n {
		want := []corev1.EnvVar{{Name: "COMPANION", Value: noProxy.Value}, noProxy}
		if diff := cmp.Diff(want, f.deploymentEnv(t, "ns", fmt.Sprintf("web-%d", i))); diff != "" {
			t.Errorf("web-%d's env (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(orig, runtime.Object(companion), cmp.AllowUnexported(normalizing{})); diff != "" {
		t.Errorf("the companion, the index's, after the reconcile (-before +after):\n%s", diff)
	}
}

// TestPrivateCopyOfABrokenDeepCopy: a DeepCopyObject that panics, or
// gives something else than a Bindable, fails the binding step naming the
// Binding, like a panic of Do.
func TestPrivateCopyOfABrokenDeepCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Bindable
		want string
	}{
		{"panics", &brokenCopy{envBinding: *newEnvBinding("ns", "b", deploymentRef("ns", "web", nil), "X", "1"), panics: true}, "binding ns/b: DeepCopyObject panicked: no copy"},
		{"another type", &brokenCopy{envBinding: *newEnvBinding("ns", "b", deploymentRef("ns", "web", nil), "X", "1")}, "binding ns/b: DeepCopyObject gives *v1.Pod, not a Bindable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := bindingStep(duck.Shapes{}.For(deploymentsGVR.GroupVersion().WithKind("Deployment").GroupKind()), subjectPod(), application{b: tc.b, ctx: context.Background(), bind: true})
			if err == nil || err.Error() != tc.want {
				t.Errorf("binding step: %v, want %q", err, tc.want)
			}
		})
	}
}

// brokenCopy is an envBinding whose DeepCopyObject is broken.
type brokenCopy struct {
	envBinding
	panics bool
}

func (b *brokenCopy) DeepCopyObject() runtime.Object {
	if b.panics {
		panic("no copy")
	}
	return &corev1.Pod{}
}
