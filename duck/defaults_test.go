package duck_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/duck"
)

// TestCreatePatchLeavesServerDefaults: a field after leaves unset that
// before holds at the kube-apiserver's default is no change (the server
// would fill it in again, and the reconciler patch forever); a field held
// at any other value is removed as before.
func TestCreatePatchLeavesServerDefaults(t *testing.T) {
	configMapVolume := func(mode *int32) corev1.Volume {
		return corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, DefaultMode: mode}}}
	}
	stored := func(image string, policy corev1.PullPolicy) corev1.Container {
		return corev1.Container{Name: "proxy", Image: image, ImagePullPolicy: policy,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}}
	}
	asWritten := func(image string) corev1.Container {
		return corev1.Container{Name: "proxy", Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 80}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}}
	}
	app := []corev1.Container{{Name: "app", Image: "app:1"}}
	tests := []struct {
		name          string
		before, after corev1.PodSpec
		want          []string
	}{{
		name:   "a ConfigMap volume's defaultMode at the default",
		before: corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume(new(int32(0o644)))}},
		after:  corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume(nil)}},
	}, {
		name:   "a ConfigMap volume's defaultMode the user chose",
		before: corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume(new(int32(0o400)))}},
		after:  corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume(nil)}},
		want:   []string{"remove /spec/template/spec/volumes/0/configMap/defaultMode"},
	}, {
		name:   "a container set whole, as written, over the server's",
		before: corev1.PodSpec{Containers: []corev1.Container{stored("proxy:1", corev1.PullIfNotPresent)}},
		after:  corev1.PodSpec{Containers: []corev1.Container{asWritten("proxy:1")}},
	}, {
		name:   "an image without a tag is pulled Always by default",
		before: corev1.PodSpec{Containers: []corev1.Container{stored("proxy", corev1.PullAlways)}},
		after:  corev1.PodSpec{Containers: []corev1.Container{asWritten("proxy")}},
	}, {
		name:   "an image pinned by digest is pulled IfNotPresent by default",
		before: corev1.PodSpec{Containers: []corev1.Container{stored("registry:5000/proxy@sha256:0123", corev1.PullIfNotPresent)}},
		after:  corev1.PodSpec{Containers: []corev1.Container{asWritten("registry:5000/proxy@sha256:0123")}},
	}, {
		name:   "a pull policy that is not the image's default",
		before: corev1.PodSpec{Containers: []corev1.Container{stored("proxy:latest", corev1.PullIfNotPresent)}},
		after:  corev1.PodSpec{Containers: []corev1.Container{asWritten("proxy:latest")}},
		want:   []string{"remove /spec/template/spec/containers/0/imagePullPolicy"},
	}, {
		name: "containers swapped: the default is the one of the entry now at the index",
		before: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "a", Image: "a:latest", ImagePullPolicy: corev1.PullAlways}, {Name: "b", Image: "b:1", ImagePullPolicy: corev1.PullIfNotPresent}}},
		after: corev1.PodSpec{Containers: []corev1.Container{{Name: "b", Image: "b:1"}, {Name: "a", Image: "a:latest"}}},
		want: []string{
			`replace /spec/template/spec/containers/0/name "b"`, `replace /spec/template/spec/containers/0/image "b:1"`,
			"remove /spec/template/spec/containers/0/imagePullPolicy",
			`replace /spec/template/spec/containers/1/name "a"`, `replace /spec/template/spec/containers/1/image "a:latest"`,
			"remove /spec/template/spec/containers/1/imagePullPolicy",
		},
	}, {
		name:   "a pod spec's defaults",
		before: corev1.PodSpec{Containers: app, DNSPolicy: corev1.DNSClusterFirst, RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler", SecurityContext: &corev1.PodSecurityContext{}, TerminationGracePeriodSeconds: new(int64(30))},
		after:  corev1.PodSpec{Containers: app},
	}, {
		name:   "a pod security context that is not empty",
		before: corev1.PodSpec{Containers: app, SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true)}},
		after:  corev1.PodSpec{Containers: app},
		want:   []string{"remove /spec/template/spec/securityContext"},
	}, {
		name:   "a default value added is an addition",
		before: corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume(nil)}},
		after:  corev1.PodSpec{Volumes: []corev1.Volume{configMapVolume(new(int32(0o644)))}},
		want:   []string{"add /spec/template/spec/volumes/0/configMap/defaultMode 420"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := &duck.WithPod{Spec: duck.WithPodSpec{Template: corev1.PodTemplateSpec{Spec: tc.before}}}
			after := &duck.WithPod{Spec: duck.WithPodSpec{Template: corev1.PodTemplateSpec{Spec: tc.after}}}
			ops, err := duck.CreatePatch(before, after)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, formatOps(t, ops)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}
