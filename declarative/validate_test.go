package declarative_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/declarative"
)

func TestSpecValidate(t *testing.T) {
	secret := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}
	}
	mode := int32(0o1777)
	tests := []struct {
		name string
		spec declarative.Spec
		want []string // what the error says; none: valid
	}{
		{"the zero Spec", declarative.Spec{}, nil},
		{"a full valid Spec", declarative.Spec{
			Env:          []corev1.EnvVar{{Name: "K_SINK", Value: "https://sink"}, {Name: "FROM", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token"}}}},
			EnvFrom:      []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			Volumes:      []corev1.Volume{{Name: "certs", VolumeSource: secret("my-certs")}},
			VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/etc/certs"}},
			Containers:   []corev1.Container{{Name: "forwarder", Image: "registry.example.com/fwd:1"}},
		}, nil},
		{"a Secret name the API server refuses", declarative.Spec{Volumes: []corev1.Volume{{Name: "certs", VolumeSource: secret("Bad_Name")}}},
			[]string{`Volumes[0].Secret.SecretName: "Bad_Name"`}},
		{"an image with a leading space", declarative.Spec{Containers: []corev1.Container{{Name: "fwd", Image: " busybox"}}},
			[]string{`Containers[0].Image: " busybox": must not have leading or trailing whitespace`}},
		{"no image", declarative.Spec{InitContainers: []corev1.Container{{Name: "init"}}}, []string{"InitContainers[0].Image: an image is required"}},
		{"a 200 KiB value", declarative.Spec{Env: []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", 200<<10)}}},
			[]string{"the Spec is 204", "more than the 16384"}},
		{"names", declarative.Spec{
			Env:     []corev1.EnvVar{{Name: "A=B"}, {Name: ""}},
			Volumes: []corev1.Volume{{Name: "Certs", VolumeSource: secret("s")}},
		}, []string{`Env[0].Name: "A=B"`, "Env[1]: name is required", `Volumes[0].Name: "Certs"`}},
		{"sources", declarative.Spec{
			Env:     []corev1.EnvVar{{Name: "X", Value: "v", ValueFrom: &corev1.EnvVarSource{}}},
			Volumes: []corev1.Volume{{Name: "none"}, {Name: "two", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: &mode}}}},
		}, []string{"Env[0].ValueFrom: one source is required", "Env[0]: value and valueFrom are mutually exclusive",
			"Volumes[0]: one volume source is required", "Volumes[1].Secret.DefaultMode: 01777", "Volumes[1]: one volume source only"}},
		{"duplicates", declarative.Spec{Env: []corev1.EnvVar{{Name: "A"}, {Name: "A"}}}, []string{`Env[1]: "A" is also Env[0]`}},
		{"a mount without a name, a subPath climbing out", declarative.Spec{VolumeMounts: []corev1.VolumeMount{{MountPath: "/x", SubPath: "../etc"}}},
			[]string{"VolumeMounts[0].Name: name is required", `VolumeMounts[0].SubPath: "../etc"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to say %q", err, w)
				}
			}
		})
	}
}
