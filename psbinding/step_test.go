package psbinding

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
)

// misbehaving is an envBinding whose Do or Undo can panic or append.
type misbehaving struct {
	envBinding
	panicDo, panicUndo bool
	appendDo           bool   // Do appends a container every time
	undoNothing        bool   // Undo leaves the env var
	panicOn            string // Do and Undo panic on the subject of this name
}

func (b *misbehaving) DeepCopyObject() runtime.Object {
	out := *b
	out.envBinding = *b.envBinding.DeepCopyObject().(*envBinding)
	return &out
}

func (b *misbehaving) Do(ctx context.Context, wp *duck.WithPod) {
	if b.panicDo || (b.panicOn != "" && wp.Name == b.panicOn) {
		panic("boom in Do")
	}
	b.envBinding.Do(ctx, wp)
	if b.appendDo {
		wp.Spec.Template.Spec.Containers = append(wp.Spec.Template.Spec.Containers, corev1.Container{Name: "extra"})
	}
}

func (b *misbehaving) Undo(ctx context.Context, wp *duck.WithPod) {
	if b.panicUndo || (b.panicOn != "" && wp.Name == b.panicOn) {
		panic(errors.New("boom in Undo"))
	}
	if !b.undoNothing {
		b.envBinding.Undo(ctx, wp)
	}
}

func subjectPod(env ...corev1.EnvVar) *duck.WithPod {
	wp := &duck.WithPod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	wp.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app", Env: env}}
	return wp
}

// The binding step turns a panic of Do or Undo into a *PanicError naming
// the Binding, the call, the subject and the value, and makes no patch;
// it leaves the subject it was given alone.
func TestBindingStepContainsPanics(t *testing.T) {
	by := duck.BoundBy{Resource: schema.GroupResource{Group: "test.bindkit.dev", Resource: "envbindings"}, Name: "b"}
	for _, tc := range []struct {
		name    string
		b       *misbehaving
		bind    bool
		wantErr string
		wantOps int
	}{
		{name: "Do", b: &misbehaving{panicDo: true}, bind: true, wantErr: "binding ns/b: Do panicked on subject deployments.apps ns/web: boom in Do"},
		{name: "Undo", b: &misbehaving{panicUndo: true}, bind: false, wantErr: "binding ns/b: Undo panicked on subject deployments.apps ns/web: boom in Undo"},
		{name: "no panic", b: &misbehaving{}, bind: true, wantOps: 2}, // the env var and the bound record
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.envBinding = *newEnvBinding("ns", "b", deploymentRef("ns", "web", nil), "X", "1")
			before := subjectPod()
			orig := before.DeepCopy()
			_, ops, err := bindingStep(duck.PodSpecable(), before, application{b: tc.b, ctx: context.Background(), bind: tc.bind, by: by, record: true})
			err = nameSubject(err, "deployments.apps ns/web")
			if diff := cmp.Diff(orig, before); diff != "" {
				t.Errorf("the step changed the subject it was given (-want +got):\n%s", diff)
			}
			if tc.wantErr == "" {
				if err != nil || len(ops) != tc.wantOps {
					t.Fatalf("got %d ops, %v; want %d ops", len(ops), err, tc.wantOps)
				}
				return
			}
			p, ok := errors.AsType[*PanicError](err)
			if !ok {
				t.Fatalf("got %v, want a *PanicError", err)
			}
			if err.Error() != tc.wantErr || len(p.Stack) == 0 || ops != nil {
				t.Errorf("got %q with %d bytes of stack and %d ops, want %q with a stack and no ops", err, len(p.Stack), len(ops), tc.wantErr)
			}
		})
	}
}

// WithContext's panic is contained too.
func TestCallWithContextContainsPanics(t *testing.T) {
	b := newEnvBinding("ns", "b", deploymentRef("ns", "web", nil), "X", "1")
	_, err := callWithContext(context.Background(), func(context.Context, Bindable) (context.Context, error) { panic("no token") }, b)
	if got, want := err.Error(), "binding ns/b: WithContext panicked: no token"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A refusal names a Do that is not idempotent, or an Undo that does not
// restore, when the reconciler's objects show it; otherwise it quotes the
// API server, bounded.
func TestRefusedNamesTheMisbehaviour(t *testing.T) {
	by := duck.BoundBy{Resource: schema.GroupResource{Group: "test.bindkit.dev", Resource: "envbindings"}, Name: "b"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{
		field.Duplicate(field.NewPath("spec", "template", "spec", "containers").Index(1).Child("name"), "extra"),
	})
	for _, tc := range []struct {
		name       string
		b          *misbehaving
		bind       bool
		before     *duck.WithPod
		wantReason string
		wantIn     []string
	}{
		{name: "idempotent Do", b: &misbehaving{}, bind: true, before: subjectPod(),
			wantReason: ReasonSubjectPatchFailed, wantIn: []string{"422 Invalid", "Duplicate value"}},
		{name: "appending Do", b: &misbehaving{appendDo: true}, bind: true, before: subjectPod(),
			wantReason: ReasonDoNotIdempotent, wantIn: []string{"Do is not idempotent", "/spec/template/spec/containers/", "Duplicate value"}},
		{name: "Undo that leaves the env var", b: &misbehaving{undoNothing: true}, bind: false, before: subjectPod(corev1.EnvVar{Name: "X", Value: "old"}),
			wantReason: ReasonUndoNotRestoring, wantIn: []string{"Undo does not restore", "/spec/template/spec/containers/0/env/0/value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.envBinding = *newEnvBinding("ns", "b", deploymentRef("ns", "web", nil), "X", "1")
			app := application{b: tc.b, ctx: context.Background(), bind: tc.bind, by: by, record: true}
			after, _, err := bindingStep(duck.PodSpecable(), tc.before, app)
			if err != nil {
				t.Fatal(err)
			}
			err = refused("binding ns/b: subject deployments.apps ns/web", duck.PodSpecable(), app, tc.before, after, invalid)
			u, ok := errors.AsType[*unavailableError](err)
			if !ok || u.reason != tc.wantReason {
				t.Fatalf("got %v, want reason %s", err, tc.wantReason)
			}
			for _, want := range tc.wantIn {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestAPIMessageIsBounded(t *testing.T) {
	var errs field.ErrorList
	for i := range 200 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("env").Index(i).Child("name"), "é", "not a valid name"))
	}
	msg := apiMessage(apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", errs))
	if len(msg) > maxAPIMessage+len(" [...]") || !strings.HasPrefix(msg, "422 Invalid: Deployment.apps \"web\" is invalid") || !strings.HasSuffix(msg, " [...]") {
		t.Errorf("message of %d bytes: %q", len(msg), msg)
	}
}

// misbehave makes f's Bindings misbehaving ones, set up by with.
func (f *reconcilerFixture) misbehave(with func(*misbehaving)) {
	get := f.r.Get
	f.r.Get = func(ns, name string) (Bindable, error) {
		b, err := get(ns, name)
		if err != nil {
			return nil, err
		}
		m := &misbehaving{envBinding: *b.(*envBinding)}
		with(m)
		return m, nil
	}
}

type panickingSubResources struct{}

func (panickingSubResources) Reconcile(context.Context, Bindable) error { panic("sub-resource boom") }
func (panickingSubResources) ReconcileDeletion(context.Context, Bindable) error {
	panic("sub-resource deletion boom")
}

// A panic of the Binding's code is the Binding's Ready condition, with a
// Warning event, and a retry: the subjects it does not panic on are bound,
// on every path, the uninstall's included.
func TestBaseReconcilerContainsPanics(t *testing.T) {
	web := matchLabels("app", "web")
	t.Run("Do panics on one subject", func(t *testing.T) {
		f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "", web), "TOKEN", "t"),
			testDeployment("ns", "calm", map[string]string{"app": "web"}), testDeployment("ns", "bomb", map[string]string{"app": "web"}))
		f.misbehave(func(m *misbehaving) { m.panicOn = "bomb" })
		f.waitCached(t, "ns", "bomb", func(*metav1.PartialObjectMetadata) bool { return true })
		err := f.r.Reconcile(context.Background(), "ns/gh")
		if _, ok := errors.AsType[*PanicError](err); !ok || controller.IsPermanentError(err) {
			t.Fatalf("Reconcile: %v, want a *PanicError to retry", err)
		}
		b := f.binding(t, "ns", "gh")
		if diff := cmp.Diff(readyCondition{"False", ReasonBindingPanicked}, ready(b)); diff != "" {
			t.Errorf("Ready (-want +got):\n%s", diff)
		}
		if msg := b.Status.GetCondition("Ready").Message; !strings.Contains(msg, "Do panicked on subject deployments.apps ns/bomb: boom in Do") {
			t.Errorf("Ready message %q does not name the subject and the panic", msg)
		}
		if diff := cmp.Diff([]corev1.EnvVar{{Name: "TOKEN", Value: "t"}}, f.deploymentEnv(t, "ns", "calm")); diff != "" {
			t.Errorf("the other subject (-want +got):\n%s", diff)
		}
		if env := f.deploymentEnv(t, "ns", "bomb"); len(env) != 0 {
			t.Errorf("the subject Do panicked on was patched: %v", env)
		}
		select {
		case e := <-f.recorder.Events:
			if !strings.Contains(e, ReasonBindingPanicked) {
				t.Errorf("event %q", e)
			}
		default:
			t.Error("no event")
		}
	})
	t.Run("SubResourcesReconciler panics", func(t *testing.T) {
		f := newReconcilerFixture(t, newEnvBinding("ns", "gh", deploymentRef("ns", "web", nil), "TOKEN", "t"), testDeployment("ns", "web", nil))
		f.r.SubResourcesReconciler = panickingSubResources{}
		if err := f.r.Reconcile(context.Background(), "ns/gh"); err == nil {
			t.Fatal("Reconcile succeeded")
		}
		b := f.binding(t, "ns", "gh")
		if diff := cmp.Diff(readyCondition{"False", ReasonBindingPanicked}, ready(b)); diff != "" {
			t.Errorf("Ready (-want +got):\n%s", diff)
		}
		if msg := b.Status.GetCondition("Ready").Message; msg != "binding ns/gh: SubResourcesReconciler.Reconcile panicked: sub-resource boom" {
			t.Errorf("Ready message %q", msg)
		}
	})
	t.Run("Undo panics on one subject in uninstall", func(t *testing.T) {
		bound := corev1.EnvVar{Name: "TOKEN", Value: "t"}
		a := newEnvBinding("ns", "a", deploymentRef("ns", "", web), "TOKEN", "t")
		a.Finalizers = []string{"test.bindkit.dev/envbindings"}
		a.Annotations = map[string]string{SubjectKindsAnnotation: "apps/v1/Deployment"}
		f := newReconcilerFixture(t, a,
			recorded(testDeployment("ns", "calm", map[string]string{"app": "web"}, bound), "a"),
			recorded(testDeployment("ns", "bomb", map[string]string{"app": "web"}, bound), "a"))
		f.misbehave(func(m *misbehaving) { m.panicOn = "bomb" })
		f.waitCached(t, "ns", "bomb", func(*metav1.PartialObjectMetadata) bool { return true })
		err := f.r.Uninstall(context.Background())
		if _, ok := errors.AsType[*PanicError](err); !ok {
			t.Fatalf("Uninstall: %v, want a *PanicError", err)
		}
		if env := f.deploymentEnv(t, "ns", "calm"); len(env) != 0 {
			t.Errorf("the other subject is still bound: %v", env)
		}
		if got := f.binding(t, "ns", "a").Finalizers; len(got) != 1 {
			t.Errorf("finalizers %v: the Binding whose Undo panicked must keep its finalizer", got)
		}
	})
}

// An Undo that takes back what another Binding set too (the same
// variable) sets the others' records to generation 0, so that they bind
// again (and are still undone at their deletion or an uninstall); an Undo
// that changes nothing, or that runs on a subject only its Binding
// records, leaves the records of others as they are.
func TestUndoResetsOthersRecordsWhenItChangesTheTemplate(t *testing.T) {
	gr := schema.GroupResource{Group: "test.bindkit.dev", Resource: "envbindings"}
	first, second := duck.BoundBy{Resource: gr, Name: "first", UID: "u1"}, duck.BoundBy{Resource: gr, Name: "second", UID: "u2"}
	for _, tc := range []struct {
		name        string
		env         []corev1.EnvVar
		records     duck.Bound
		undoNothing bool
		want        duck.Bound
	}{{
		name:    "Undo removes the shared variable",
		env:     []corev1.EnvVar{{Name: "X", Value: "1"}},
		records: duck.Bound{first: 1, second: 4},
		want:    duck.Bound{second: 0},
	}, {
		name:        "Undo changes nothing",
		env:         []corev1.EnvVar{{Name: "X", Value: "1"}},
		records:     duck.Bound{first: 1, second: 4},
		undoNothing: true,
		want:        duck.Bound{second: 4},
	}, {
		name:    "the subject carries nothing to undo",
		records: duck.Bound{first: 1, second: 4},
		want:    duck.Bound{second: 4},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &misbehaving{undoNothing: tc.undoNothing}
			b.envBinding = *newEnvBinding("ns", "first", deploymentRef("ns", "web", nil), "X", "1")
			before := subjectPod(tc.env...)
			before.Annotations = duck.SetBound(nil, tc.records)
			after, _, err := bindingStep(duck.PodSpecable(), before, application{b: b, ctx: context.Background(), by: first, record: true})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, duck.BoundOf(after.Annotations)); diff != "" {
				t.Errorf("records after the Undo (-want +got):\n%s", diff)
			}
		})
	}
}
