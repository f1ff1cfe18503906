package duck_test

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
)

func ExampleCreatePatch() {
	// The object as the admission webhook or the dynamic client sees it,
	// with a field that WithPod does not know.
	raw := []byte(`{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "web", "namespace": "shop"},
		"spec": {"replicas": 2, "x-vendor": {"keep": true}, "template": {
			"metadata": {"labels": {"app": "web"}},
			"spec": {"containers": [{"name": "web", "image": "nginx", "env": [{"name": "A", "value": "1"}]}]}}}}`)
	before, err := duck.PodSpecable().Decode(raw)
	if err != nil {
		panic(err)
	}

	// What a Binding's Do would do.
	after := before.DeepCopy()
	c := &after.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gh"}, Key: "token"}}})

	ops, err := duck.CreatePatch(before, after)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(ops)
	fmt.Println(string(out))

	unchanged, _ := duck.CreatePatch(before, before.DeepCopy())
	fmt.Println(len(unchanged))
	// Output:
	// [{"op":"add","path":"/spec/template/spec/containers/0/env/1","value":{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"gh","key":"token"}}}}]
	// 0
}

func ExampleShape_CreatePatch() {
	raw := []byte(`{"apiVersion": "batch/v1", "kind": "CronJob",
		"metadata": {"name": "nightly", "namespace": "shop"},
		"spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {
			"spec": {"containers": [{"name": "job", "image": "busybox"}]}}}}}}`)
	shape := duck.Shapes{}.For(schema.GroupKind{Group: "batch", Kind: "CronJob"})
	before, err := shape.Decode(raw)
	if err != nil {
		panic(err)
	}
	after := before.DeepCopy()
	after.Spec.Template.Labels = map[string]string{"bound": "true"}

	ops, err := shape.CreatePatch(before, after)
	if err != nil {
		panic(err)
	}
	for _, op := range ops {
		fmt.Println(op.Json())
	}
	// Output:
	// {"op":"add","path":"/spec/jobTemplate/spec/template/metadata","value":{"labels":{"bound":"true"}}}
}

func ExampleShapes() {
	// A custom resource that keeps its pod template at spec.workload.template.
	shapes := duck.Shapes{}.With(schema.GroupKind{Group: "example.bindkit.dev", Kind: "Workload"},
		duck.TemplateAt("spec", "workload", "template"))

	for _, gk := range []schema.GroupKind{
		{Group: "apps", Kind: "Deployment"},
		{Group: "batch", Kind: "CronJob"},
		{Kind: "Pod"},
		{Group: "example.bindkit.dev", Kind: "Workload"},
	} {
		fmt.Printf("%s: %s\n", gk.String(), shapes.For(gk))
	}
	// Output:
	// Deployment.apps: spec.template
	// CronJob.batch: spec.jobTemplate.spec.template
	// Pod: pod
	// Workload.example.bindkit.dev: spec.workload.template
}
