package psbinding

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// realisticDeployment is about 3 KB of JSON: two containers with env,
// ports, probes, resources and mounts, as a production Deployment has.
func realisticDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name, "tier": "backend", "team": "payments", "version": "v3"}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intOrString(8080)}}, PeriodSeconds: 10}
	container := func(n string) corev1.Container {
		return corev1.Container{
			Name: n, Image: "registry.example.com/payments/" + n + ":v3.14.1",
			Args:  []string{"--port=8080", "--log-level=info", "--db=postgres://db.payments.svc:5432/payments"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
			Env: []corev1.EnvVar{
				{Name: "GOMAXPROCS", Value: "2"}, {Name: "REGION", Value: "eu-west-1"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + n}},
			LivenessProbe:  probe,
			ReadinessProbe: probe,
		}
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{
			"deployment.kubernetes.io/revision": "42", "owner": "payments-team@example.com",
		}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"prometheus.io/scrape": "true"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					Containers:         []corev1.Container{container(name), container(name + "-sidecar")},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}},
					}}},
				},
			},
		},
	}
}

// BenchmarkAdmit measures one admission decision on a ~3 KB Deployment with
// n Bindings in the request's namespace, each selecting its own app label.
func BenchmarkAdmit(b *testing.B) {
	raw, err := json.Marshal(realisticDeployment("ns", "web"))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("object size: %d bytes", len(raw))
	for _, n := range []int{10, 1000, 10000} {
		bindings := make([]Bindable, 0, n+1)
		for i := range n {
			sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i)}}
			bindings = append(bindings, newEnvBinding("ns", fmt.Sprintf("b%05d", i), deploymentRef("ns", "", sel), "BOUND", "yes"))
		}
		run := func(name string, bindings []Bindable, reqNS string, wantPatch bool) {
			var a admitter
			a.setIndex(bindings)
			req := deploymentRequest(admissionv1.Create, reqNS, "web", raw)
			ctx := context.Background()
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					resp := a.admit(ctx, req)
					if !resp.Allowed || (len(resp.Patch) > 0) != wantPatch {
						b.Fatalf("unexpected response: %+v", resp)
					}
				}
			})
		}
		run("no-binding-in-namespace", bindings, "other", false)
		run("none-matching", bindings, "ns", false)
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		run("selector-match", append(bindings, newEnvBinding("ns", "match", deploymentRef("ns", "", sel), "BOUND", "yes")), "ns", true)
		run("exact-match", append(bindings, newEnvBinding("ns", "match", deploymentRef("ns", "web", nil), "BOUND", "yes")), "ns", true)
	}
}

func intOrString(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }
