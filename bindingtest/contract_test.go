package bindingtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// testBinding is a Binding whose Do and Undo the test chooses.
type testBinding struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	status   duck.Status
	do, undo func(*duck.WithPod)
}

func (b *testBinding) GetSubject() tracker.Reference         { return tracker.Reference{} }
func (b *testBinding) GetBindingStatus() duck.BindableStatus { return &b.status }
func (b *testBinding) DeepCopyObject() runtime.Object        { c := *b; return &c }
func (b *testBinding) Do(_ context.Context, wp *duck.WithPod) {
	if b.do != nil {
		b.do(wp)
	}
}
func (b *testBinding) Undo(_ context.Context, wp *duck.WithPod) {
	if b.undo != nil {
		b.undo(wp)
	}
}

// eachContainer calls f on every container and init container of wp.
func eachContainer(wp *duck.WithPod, f func(*corev1.Container)) {
	spec := &wp.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			f(&list[i])
		}
	}
}

func isFoo(e corev1.EnvVar) bool { return e.Name == "FOO" }

// setFoo is a Do that keeps the contract.
func setFoo(wp *duck.WithPod) {
	eachContainer(wp, func(c *corev1.Container) {
		if i := slices.IndexFunc(c.Env, isFoo); i >= 0 {
			c.Env[i].Value = "bar"
		} else {
			c.Env = append(c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"})
		}
	})
}

// removeFoo is its Undo.
func removeFoo(wp *duck.WithPod) {
	eachContainer(wp, func(c *corev1.Container) {
		c.Env = slices.DeleteFunc(c.Env, isFoo)
	})
}

func TestContractProblems(t *testing.T) {
	tests := []struct {
		name     string
		do, undo func(*duck.WithPod)
		want     string // a substring of a problem on every subject; empty for none
		noChange bool
	}{{
		name: "a Binding that keeps the contract",
		do:   setFoo, undo: removeFoo,
	}, {
		name: "Do appends every time",
		do: func(wp *duck.WithPod) {
			eachContainer(wp, func(c *corev1.Container) { c.Env = append(c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"}) })
		},
		undo: removeFoo,
		want: "Do is not idempotent",
	}, {
		name: "Undo forgets what Do did",
		do:   setFoo,
		want: "Undo after Do does not restore the subject",
	}, {
		name: "Undo removes what the workload had itself",
		do:   setFoo,
		undo: func(wp *duck.WithPod) {
			removeFoo(wp)
			eachContainer(wp, func(c *corev1.Container) { c.VolumeMounts = nil })
		},
		want: "Undo of a subject Do never bound changes it",
	}, {
		name: "Do reorders the containers",
		do: func(wp *duck.WithPod) {
			setFoo(wp)
			slices.Reverse(wp.Spec.Template.Spec.Containers)
		},
		undo: removeFoo,
		want: "a field Go's types do not know",
	}, {
		name: "Do adds a container without a name (a zero spec)",
		do: func(wp *duck.WithPod) {
			if !slices.ContainsFunc(wp.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "" }) {
				wp.Spec.Template.Spec.Containers = append(wp.Spec.Template.Spec.Containers, corev1.Container{})
			}
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Containers = slices.DeleteFunc(wp.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "" })
		},
		want: "Do adds a container with an empty name: is the Binding's spec filled in?",
	}, {
		name: "Do adds a volume named like the kit's",
		do: func(wp *duck.WithPod) {
			if !slices.ContainsFunc(wp.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == KitNamePrefix+"mine" }) {
				wp.Spec.Template.Spec.Volumes = append(wp.Spec.Template.Spec.Volumes, corev1.Volume{Name: KitNamePrefix + "mine"})
			}
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Volumes = slices.DeleteFunc(wp.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == KitNamePrefix+"mine" })
		},
		want: "are the kit's subjects' own",
	}, {
		name:     "Do changes nothing",
		noChange: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, do: tc.do, undo: tc.undo}
			for _, s := range Subjects("shop") {
				c := &checker{}
				changed := c.subject(t.Context(), b, s)
				if changed == tc.noChange {
					t.Errorf("%s: changed = %v, want %v", s.Name, changed, !tc.noChange)
				}
				got := strings.Join(c.problems, "\n")
				switch {
				case tc.want == "" && got != "":
					t.Errorf("%s: problems:\n%s", s.Name, got)
				case tc.want != "" && !strings.Contains(got, tc.want):
					t.Errorf("%s: problems do not name %q:\n%s", s.Name, tc.want, got)
				}
			}
		})
	}
}

// TestSubjectsCoverEveryShape: one subject of each kind bindkit binds, each
// carrying UnknownField in the places a patch could lose it, and each
// decoding through its shape.
func TestSubjectsCoverEveryShape(t *testing.T) {
	var kinds []string
	for _, s := range Subjects("shop") {
		kinds = append(kinds, s.Object.GetKind())
		if s.Object.GetNamespace() != "shop" {
			t.Errorf("%s in namespace %q", s.Name, s.Object.GetNamespace())
		}
		wp, err := s.Shape.FromUnstructured(s.Object)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if n := len(wp.Spec.Template.Spec.Containers); n != 2 {
			t.Errorf("%s: %d containers, want 2", s.Name, n)
		}
		ms := markers(s.Object.Object, nil, "")
		if len(ms) < 7 {
			t.Errorf("%s: %d unknown fields, want them beside and in the template, containers and volumes: %v", s.Name, len(ms), ms)
		}
	}
	want := []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod", CustomWorkloadKind.Kind}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
}

// TestOneBugOneFailure: a bug that breaks a promise the same way on every
// subject is one failure naming them all, whatever the shape's path.
func TestOneBugOneFailure(t *testing.T) {
	b := &testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, do: setFoo}
	got := contractFailures(t, b, ContractOptions{})
	if len(got) != 1 {
		t.Fatalf("%d failures, want 1:\n%s", len(got), strings.Join(got, "\n----\n"))
	}
	for _, s := range Subjects("shop") {
		if !strings.Contains(got[0], s.Name) {
			t.Errorf("the failure does not name %s:\n%s", s.Name, got[0])
		}
	}
	if strings.Contains(got[0], "/spec/template/") || strings.Contains(got[0], "jobTemplate") {
		t.Errorf("the failure's paths are not relative to the pod template:\n%s", got[0])
	}
}
