package declaredbinding_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/test/declaredbinding/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

// TestCRDRefusesWhatValidateRefusesWithRealAPIServer: the kind's CRD,
// generated from declarative.Spec's markers, refuses at the Binding's
// write (a server-side dry run) each Spec that Spec.Validate refuses, and
// admits each one it admits: the kube-apiserver applies the Spec at
// admission with no process running, so what it lets in must be valid
// in a pod.
func TestCRDRefusesWhatValidateRefusesWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "crd-")
	waitServed(t, dyn)
	env1 := func(name, value string) []corev1.EnvVar { return []corev1.EnvVar{{Name: name, Value: value}} }
	secretVolume := func(name, secret string, mode *int32) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: mode}}}
	}
	sidecar := func(name, image string) corev1.Container { return corev1.Container{Name: name, Image: image} }
	for _, tc := range []struct {
		name string
		spec declarative.Spec
		// refused is what the CRD's message must contain, "" if it admits it.
		refused string
	}{
		{name: "valid: env, volume, mount, sidecar, init container", spec: declarative.Spec{
			Env: env1("SINK", "https://x"), Volumes: []corev1.Volume{secretVolume("certs", "sink-ca", ptr.To[int32](0o644))},
			VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs", SubPath: "a/b"}}, Containers: []corev1.Container{sidecar("proxy", "envoy:1")},
			InitContainers: []corev1.Container{sidecar("init", "busybox")}, InitContainersToo: true,
			EnvFrom: []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		}},
		{name: "valid: valueFrom a Secret key", spec: declarative.Spec{Env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token.txt"}}}}}},
		{name: "env name with '='", spec: declarative.Spec{Env: env1("A=B", "x")}, refused: "env names must be printable ASCII"},
		{name: "env name twice", spec: declarative.Spec{Env: append(env1("A", "1"), env1("A", "2")...)}, refused: "Duplicate value"},
		{name: "value and valueFrom", spec: declarative.Spec{Env: []corev1.EnvVar{{Name: "A", Value: "1", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}, refused: "mutually exclusive"},
		{name: "valueFrom with no source", spec: declarative.Spec{Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{}}}}, refused: "exactly one source"},
		{name: "secretKeyRef with a bad name", spec: declarative.Spec{Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "Bad_Name"}, Key: "k"}}}}}, refused: "secretKeyRef"},
		{name: "volume name not a DNS label", spec: declarative.Spec{Volumes: []corev1.Volume{secretVolume("Certs", "x", nil)}}, refused: "volume names must be DNS labels"},
		{name: "volume with no source", spec: declarative.Spec{Volumes: []corev1.Volume{{Name: "certs"}}}, refused: "exactly one source"},
		{name: "volume with two sources", spec: declarative.Spec{Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}, Secret: &corev1.SecretVolumeSource{SecretName: "x"}}}}}, refused: "exactly one source"},
		{name: "secret volume mode beyond 0777", spec: declarative.Spec{Volumes: []corev1.Volume{secretVolume("certs", "x", ptr.To[int32](0o1000))}}, refused: "mode up to 0777"},
		{name: "secret volume with a bad Secret name", spec: declarative.Spec{Volumes: []corev1.Volume{secretVolume("certs", "-x", nil)}}, refused: "Secret name"},
		{name: "volume name twice", spec: declarative.Spec{Volumes: []corev1.Volume{secretVolume("certs", "a", nil), secretVolume("certs", "b", nil)}}, refused: "Duplicate value"},
		{name: "mount with a bad name", spec: declarative.Spec{VolumeMounts: []corev1.VolumeMount{{Name: "a_b", MountPath: "/x"}}}, refused: "volume mount names must be DNS labels"},
		{name: "mount with an absolute subPath", spec: declarative.Spec{VolumeMounts: []corev1.VolumeMount{{Name: "a", MountPath: "/x", SubPath: "/etc"}}}, refused: "subPath"},
		{name: "mount with '..' in its subPath", spec: declarative.Spec{VolumeMounts: []corev1.VolumeMount{{Name: "a", MountPath: "/x", SubPath: "a/../../b"}}}, refused: "subPath"},
		{name: "container name not a DNS label", spec: declarative.Spec{Containers: []corev1.Container{sidecar("Proxy", "envoy")}}, refused: "container names must be DNS labels"},
		{name: "container with no image", spec: declarative.Spec{Containers: []corev1.Container{sidecar("proxy", "")}}, refused: "image"},
		{name: "image with surrounding whitespace", spec: declarative.Spec{InitContainers: []corev1.Container{sidecar("init", " busybox")}}, refused: "image"},
		{name: "a container and an init container of one name", spec: declarative.Spec{Containers: []corev1.Container{sidecar("x", "a")},
			InitContainers: []corev1.Container{sidecar("x", "b")}}, refused: "same name"},
		{name: "envFrom with both sources", spec: declarative.Spec{EnvFrom: []corev1.EnvFromSource{{
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}},
			SecretRef:    &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}}}}, refused: "exactly one of configMapRef and secretRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			validateErr := tc.spec.Validate()
			if (validateErr == nil) != (tc.refused == "") {
				t.Fatalf("Spec.Validate = %v: the case is wrong, want refused %v", validateErr, tc.refused != "")
			}
			b := &v1alpha1.DeclaredBinding{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"},
				Spec:       v1alpha1.DeclaredBindingSpec{Subject: trackerRef(), Declare: tc.spec}}
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
			if err != nil {
				t.Fatal(err)
			}
			_, err = dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: content},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused a Spec Validate admits: %v", err)
			case tc.refused != "" && err == nil:
				t.Errorf("admitted a Spec Validate refuses (%v)", validateErr)
			case tc.refused != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("refused with %v, want an Invalid error containing %q (Validate: %v)", err, tc.refused, validateErr)
			}
		})
	}
}

func trackerRef() tracker.Reference {
	return tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
}

// waitServed waits until the kube-apiserver serves DeclaredBindings: a
// CRD of this size (declarative.Spec's schema) is established some time
// after it is created.
func waitServed(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v1alpha1.GroupVersionResource()).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		crd, gerr := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(t.Context(), v1alpha1.Resource+"."+v1alpha1.GroupName, metav1.GetOptions{})
		var conditions any
		if gerr == nil {
			conditions, _, _ = unstructured.NestedSlice(crd.Object, "status", "conditions")
		}
		t.Fatalf("DeclaredBindings not served: %v (CRD: %v, conditions %v)", err, gerr, conditions)
	}
	t.Logf("DeclaredBindings served after %v", time.Since(start).Round(time.Millisecond))
}
