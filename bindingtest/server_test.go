package bindingtest

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/testenv"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }

const boundName = "bound-sidecar"

func isBound(c corev1.Container) bool { return c.Name == boundName }

// TestCheckContractOnTheServer: the mistakes a new author makes are each
// reported once, with a message naming the cause, on the subjects as the
// kube-apiserver stores them.
func TestCheckContractOnTheServer(t *testing.T) {
	env := controlPlane.Env(t)
	sidecar := corev1.Container{Name: boundName, Image: "registry.example/sidecar:1"}
	tests := []struct {
		name     string
		do, undo func(*duck.WithPod)
		want     []string // substrings of the one failure; none for a Binding that keeps the contract
	}{{
		name: "in place",
		do: func(wp *duck.WithPod) {
			cs := &wp.Spec.Template.Spec.Containers
			if i := slices.IndexFunc(*cs, isBound); i >= 0 {
				(*cs)[i].Image = sidecar.Image
				return
			}
			*cs = append(*cs, sidecar)
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Containers = slices.DeleteFunc(wp.Spec.Template.Spec.Containers, isBound)
		},
	}, {
		// The server fills terminationMessagePath, imagePullPolicy, ...
		// into the sidecar; Do leaves them unset again, which patches
		// nothing (duck.Shape.CreatePatch).
		name: "delete then append",
		do: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Containers = append(slices.DeleteFunc(wp.Spec.Template.Spec.Containers, isBound), sidecar)
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Containers = slices.DeleteFunc(wp.Spec.Template.Spec.Containers, isBound)
		},
	}, {
		name: "Do adds a sidecar without an image",
		do: func(wp *duck.WithPod) {
			if cs := &wp.Spec.Template.Spec.Containers; !slices.ContainsFunc(*cs, isBound) {
				*cs = append(*cs, corev1.Container{Name: boundName})
			}
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Containers = slices.DeleteFunc(wp.Spec.Template.Spec.Containers, isBound)
		},
		want: []string{"Do's patch is refused by the API server on the subject as the API server stores it", "image: Required value"},
	}, {
		name: "Undo forgets a volume",
		do: func(wp *duck.WithPod) {
			spec := &wp.Spec.Template.Spec
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "shared" }) {
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
		},
		want: []string{"Undo breaks its promise to restore", "leaves template.spec.volumes[shared], which Do added"},
	}, {
		name: "Do appends every time",
		do: func(wp *duck.WithPod) {
			c := &wp.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"})
		},
		undo: func(wp *duck.WithPod) {
			for i := range wp.Spec.Template.Spec.Containers {
				c := &wp.Spec.Template.Spec.Containers[i]
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "FOO" })
			}
		},
		want: []string{"Do breaks its promise to be idempotent"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, do: tc.do, undo: tc.undo}
			got := contractFailures(t, b, ContractOptions{Env: env})
			if want := min(len(tc.want), 1); len(got) != want {
				t.Fatalf("%d failures, want %d:\n%s", len(got), want, strings.Join(got, "\n----\n"))
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("the failure does not say %q:\n%s", w, got[0])
				}
			}
			for _, f := range got {
				if n := strings.Count(f, "\n"); n > 20 {
					t.Errorf("a failure of %d lines, want a short one:\n%s", n, f)
				}
			}
			t.Logf("failures:\n%s", strings.Join(got, "\n----\n"))
		})
	}
}
