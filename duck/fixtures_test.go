package duck_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// realisticDeployment is a Deployment of about 3 KB of JSON, the size of a
// typical application's: two containers with env, ports, probes, resources
// and mounts.
func realisticDeployment() *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "tier": "frontend"}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3,
		}
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	replicas := int32(3)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "shop", Labels: labels, Generation: 4, ResourceVersion: "12345", UID: "6b1f4a9e-2d3c-4f5e-8a7b-9c0d1e2f3a4b",
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "4", "team": "storefront"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
				Spec: corev1.PodSpec{
					ServiceAccountName: "web",
					SecurityContext:    &corev1.PodSecurityContext{RunAsUser: new(int64(1000)), FSGroup: new(int64(2000))},
					Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}},
					InitContainers: []corev1.Container{{
						Name: "migrate", Image: "registry.example.com/shop/migrate:1.4.2",
						Command:      []string{"/bin/migrate", "--to=latest"},
						Env:          []corev1.EnvVar{{Name: "DB_HOST", Value: "postgres.shop.svc.cluster.local"}},
						Resources:    res,
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web", ReadOnly: true}},
					}},
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
					Containers: []corev1.Container{{
						Name: "web", Image: "registry.example.com/shop/web:1.4.2",
						Args:  []string{"--listen=:8080", "--metrics=:9090", "--log-format=json"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "LOG_LEVEL", Value: "info"},
							{Name: "DB_HOST", Value: "postgres.shop.svc.cluster.local"},
							{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						},
						Resources:       res,
						VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web", ReadOnly: true}, {Name: "cache", MountPath: "/var/cache/web"}},
						LivenessProbe:   probe("/healthz"),
						ReadinessProbe:  probe("/ready"),
						ImagePullPolicy: corev1.PullIfNotPresent,
					}, {
						Name: "proxy", Image: "registry.example.com/infra/proxy:2.0.1",
						Ports:        []corev1.ContainerPort{{Name: "https", ContainerPort: 8443}},
						Env:          []corev1.EnvVar{{Name: "UPSTREAM", Value: "127.0.0.1:8080"}},
						Resources:    res,
						VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
						{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls"}}},
					},
				},
			},
		},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toMap(t testing.TB, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustJSON(t, v), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// applyPatch applies add, replace and remove operations to a JSON document
// the way RFC 6902 says, so unit tests can check what a patch does to a
// real object, unknown fields included.
func applyPatch(doc map[string]any, ops []jsonpatch.Operation) (map[string]any, error) {
	var root any = doc
	for _, op := range ops {
		var value any
		if op.Value != nil {
			b, err := json.Marshal(op.Value)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &value); err != nil {
				return nil, err
			}
		}
		tokens := strings.Split(op.Path, "/")[1:]
		for i := range tokens {
			tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tokens[i], "~1", "/"), "~0", "~")
		}
		var err error
		root, err = applyOp(root, tokens, op.Operation, value)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Operation, op.Path, err)
		}
	}
	return root.(map[string]any), nil
}

func applyOp(node any, tokens []string, op string, value any) (any, error) {
	if len(tokens) == 0 {
		return value, nil // replacing the whole document
	}
	tok, last := tokens[0], len(tokens) == 1
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		if last {
			switch {
			case op == "remove" && !ok, op == "replace" && !ok:
				return nil, fmt.Errorf("member %q missing", tok)
			case op == "remove":
				delete(n, tok)
			default:
				n[tok] = value
			}
			return n, nil
		}
		if !ok {
			return nil, fmt.Errorf("member %q missing", tok)
		}
		c, err := applyOp(child, tokens[1:], op, value)
		n[tok] = c
		return n, err
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i > len(n) || (i == len(n) && !(last && op == "add")) {
			return nil, fmt.Errorf("index %q out of range (len %d)", tok, len(n))
		}
		if last {
			switch op {
			case "add":
				n = append(n[:i], append([]any{value}, n[i:]...)...)
			case "remove":
				n = append(n[:i], n[i+1:]...)
			default:
				n[i] = value
			}
			return n, nil
		}
		c, err := applyOp(n[i], tokens[1:], op, value)
		n[i] = c
		return n, err
	}
	return nil, fmt.Errorf("cannot descend into %T at %q", node, tok)
}
