package v1alpha1

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

func newBinding(secret string) *GithubBinding {
	return &GithubBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "gh"},
		Spec: GithubBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Secret:  corev1.LocalObjectReference{Name: secret},
		},
	}
}

func withPod(spec corev1.PodSpec) *duck.WithPod {
	wp := &duck.WithPod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	wp.Spec.Template.Spec = spec
	return wp
}

var (
	bindingMount     = corev1.VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true}
	unrelatedVol     = corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	unrelatedMnt     = corev1.VolumeMount{Name: "cache", MountPath: "/cache"}
	secretVolume     = func(name string) corev1.Volume { return secretVolumeMode(name, nil) }
	secretVolumeMode = func(name string, mode *int32) corev1.Volume {
		return corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name, DefaultMode: mode}}}
	}
)

// TestContract checks Do and Undo on a workload of every shape, through the
// conversions and patches the framework applies.
func TestContract(t *testing.T) {
	bindingtest.CheckContract(t, newBinding("gh-token"), bindingtest.ContractOptions{})
}

func TestDo(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.PodSpec
		want corev1.PodSpec
	}{{
		name: "containers and init containers get the mount",
		in: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate"}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: "sidecar"}},
		},
		want: corev1.PodSpec{
			Volumes:        []corev1.Volume{secretVolume("gh-token")},
			InitContainers: []corev1.Container{{Name: "migrate", VolumeMounts: []corev1.VolumeMount{bindingMount}}},
			Containers: []corev1.Container{
				{Name: "app", VolumeMounts: []corev1.VolumeMount{bindingMount}},
				{Name: "sidecar", VolumeMounts: []corev1.VolumeMount{bindingMount}},
			},
		},
	}, {
		name: "unrelated volumes and mounts stay, in order",
		in: corev1.PodSpec{
			Volumes:    []corev1.Volume{unrelatedVol},
			Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{unrelatedMnt}}},
		},
		want: corev1.PodSpec{
			Volumes:    []corev1.Volume{unrelatedVol, secretVolume("gh-token")},
			Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{unrelatedMnt, bindingMount}}},
		},
	}, {
		name: "an older binding of another secret is updated in place, keeping the defaulted mode",
		in: corev1.PodSpec{
			Volumes:    []corev1.Volume{secretVolumeMode("old", ptr.To[int32](0o644)), unrelatedVol},
			Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: VolumeName, MountPath: "/old"}}}},
		},
		want: corev1.PodSpec{
			Volumes:    []corev1.Volume{secretVolumeMode("gh-token", ptr.To[int32](0o644)), unrelatedVol},
			Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{bindingMount}}},
		},
	}, {
		name: "a volume of that name but another source is taken over",
		in: corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: VolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "app"}},
		},
		want: corev1.PodSpec{
			Volumes:    []corev1.Volume{secretVolume("gh-token")},
			Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{bindingMount}}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBinding("gh-token")
			once := withPod(tc.in)
			b.Do(context.Background(), once)
			if diff := cmp.Diff(tc.want, once.Spec.Template.Spec); diff != "" {
				t.Errorf("Do (-want +got):\n%s", diff)
			}
			twice := once.DeepCopy()
			b.Do(context.Background(), twice)
			if diff := cmp.Diff(once, twice); diff != "" {
				t.Errorf("Do twice differs from Do once (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestUndo(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.PodSpec
	}{{
		name: "bare pod spec",
		in:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
	}, {
		name: "init containers and unrelated volumes and mounts",
		in: corev1.PodSpec{
			Volumes:        []corev1.Volume{unrelatedVol},
			InitContainers: []corev1.Container{{Name: "migrate", VolumeMounts: []corev1.VolumeMount{unrelatedMnt}}},
			Containers:     []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{unrelatedMnt}}, {Name: "sidecar"}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBinding("gh-token")
			wp := withPod(*tc.in.DeepCopy())
			b.Do(context.Background(), wp)
			if diff := cmp.Diff(tc.in, wp.Spec.Template.Spec); diff == "" {
				t.Fatal("Do changed nothing; the test proves nothing")
			}
			b.Undo(context.Background(), wp)
			if diff := cmp.Diff(tc.in, wp.Spec.Template.Spec); diff != "" {
				t.Errorf("Undo after Do (-original +got):\n%s", diff)
			}
			b.Undo(context.Background(), wp)
			if diff := cmp.Diff(tc.in, wp.Spec.Template.Spec); diff != "" {
				t.Errorf("Undo twice (-original +got):\n%s", diff)
			}
		})
	}
}

func TestGetSubject(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name    string
		subject tracker.Reference
		want    tracker.Reference
	}{{
		name:    "empty namespace is the binding's",
		subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		want:    tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
	}, {
		name:    "an explicit namespace is kept",
		subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Selector: sel},
		want:    tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Selector: sel},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBinding("gh-token")
			b.Spec.Subject = tc.subject
			if diff := cmp.Diff(tc.want, b.GetSubject()); diff != "" {
				t.Errorf("GetSubject (-want +got):\n%s", diff)
			}
			if b.Spec.Subject.Namespace != tc.subject.Namespace {
				t.Error("GetSubject changed the spec")
			}
		})
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	b := newBinding("gh-token")
	b.Spec.Subject.Name = ""
	b.Spec.Subject.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	b.GetBindingStatus().MarkBindingAvailable()
	c := b.DeepCopyObject().(*GithubBinding)
	c.Spec.Subject.Selector.MatchLabels["app"] = "changed"
	c.Status.Conditions[0].Reason = "Changed"
	if got := b.Spec.Subject.Selector.MatchLabels["app"]; got != "web" {
		t.Errorf("copy shares the selector: original now %q", got)
	}
	if got := b.Status.Conditions[0].Reason; got == "Changed" {
		t.Error("copy shares the conditions")
	}
}
