package psbinding

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/duck"
)

// TestObservedFromJSONReadsAsFromObject checks that a subject listed as
// JSON (a duck.RawList item, without apiVersion and kind) gives the pod
// template, the deletion state and the object that the same
// subject read as an unstructured object (a GET) gives, templates that are
// absent or of the wrong type included.
func TestObservedFromJSONReadsAsFromObject(t *testing.T) {
	deployment := `{"metadata":{"name":"web","namespace":"ns","resourceVersion":"7","labels":{"app":"web"},"annotations":{"a":"b"}%s},
		"spec":{"replicas":2,"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"app:1","env":[{"name":"A","value":"1"}]}]}}}}`
	for _, tc := range []struct {
		name  string
		shape duck.Shape
		json  string
	}{
		{"a Deployment", duck.PodSpecable(), fmt.Sprintf(deployment, "")},
		{"a Deployment being deleted", duck.PodSpecable(), fmt.Sprintf(deployment, `,"deletionTimestamp":"2026-11-27T10:00:00Z"`)},
		{"a Pod", duck.Pod(), `{"metadata":{"name":"p","labels":{"x":"y"}},"spec":{"containers":[{"name":"app","image":"app:1"}]}}`},
		{"a CronJob", duck.CronJob(), `{"metadata":{"name":"c"},"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"app"}]}}}}}}`},
		{"no template", duck.PodSpecable(), `{"metadata":{"name":"w"},"spec":{}}`},
		{"a template that is a string", duck.PodSpecable(), `{"metadata":{"name":"w"},"spec":{"template":"x"}}`},
		{"containers that are a string", duck.PodSpecable(), `{"metadata":{"name":"w"},"spec":{"template":{"spec":{"containers":"x"}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(tc.json), &obj); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetAPIVersion("apps/v1")
			u.SetKind("Deployment")
			fromObject := &observed{u: u}
			fromJSON := &observed{raw: []byte(tc.json), apiVersion: "apps/v1", kind: "Deployment"}

			want, wantErr := fromObject.pod(tc.shape)
			got, err := fromJSON.pod(tc.shape)
			if (err != nil) != (wantErr != nil) || errors.Is(err, duck.ErrNoPodTemplate) != errors.Is(wantErr, duck.ErrNoPodTemplate) {
				t.Fatalf("pod: %v, from the object: %v", err, wantErr)
			}
			if want != nil {
				want.ManagedFields = nil // Decode skips them, as the informers do
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod (-from the object +from JSON):\n%s", diff)
			}
			if fromJSON.deleting(got) != fromObject.deleting(want) {
				t.Errorf("deleting: %v, from the object %v", fromJSON.deleting(got), fromObject.deleting(want))
			}
			gotObj, err := fromJSON.object()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(u, gotObj); diff != "" {
				t.Errorf("object (-from the object +from JSON):\n%s", diff)
			}
		})
	}
}

// TestObservedFromProtobufReadsAsFromJSON checks that a subject listed as
// protobuf (a duck.RawList item holding its typed object) gives the pod
// template, the deletion state, the object and the guarded patch that
// the same subject listed as JSON gives, for every kind ListRaw reads as
// protobuf, with its own shape and with one that is not where the kind
// keeps its template.
func TestObservedFromProtobufReadsAsFromJSON(t *testing.T) {
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "A", Value: "<1>"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("0.5Gi")}},
		}}},
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"app": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		}
	}
	deleting := meta("gone")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name  string
		shape duck.Shape
		obj   runtime.Object
	}{
		{"a Deployment", duck.PodSpecable(), &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Template: template}}},
		{"a Deployment being deleted", duck.PodSpecable(), &appsv1.Deployment{ObjectMeta: deleting, Spec: appsv1.DeploymentSpec{Template: template}}},
		{"a Deployment with another shape", duck.TemplateAt("spec", "workload", "template"), &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Template: template}}},
		{"a StatefulSet", duck.PodSpecable(), &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Template: template}}},
		{"a DaemonSet", duck.PodSpecable(), &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{Template: template}}},
		{"a ReplicaSet", duck.PodSpecable(), &appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Template: template}}},
		{"a Job", duck.PodSpecable(), &batchv1.Job{ObjectMeta: meta("job"), Spec: batchv1.JobSpec{Template: template}}},
		{"a CronJob", duck.CronJob(), &batchv1.CronJob{ObjectMeta: meta("cron"), Spec: batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}}},
		{"a CronJob as PodSpecable", duck.PodSpecable(), &batchv1.CronJob{ObjectMeta: meta("cron"), Spec: batchv1.CronJobSpec{Schedule: "@daily"}}},
		{"a Pod", duck.Pod(), &corev1.Pod{ObjectMeta: meta("p"), Spec: template.Spec}},
		{"a Pod as PodSpecable", duck.PodSpecable(), &corev1.Pod{ObjectMeta: meta("p"), Spec: template.Spec}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON := &observed{raw: raw, apiVersion: "apps/v1", kind: "Kind"}
			fromProtobuf := &observed{typed: tc.obj, apiVersion: "apps/v1", kind: "Kind"}

			want, wantErr := fromJSON.pod(tc.shape)
			got, err := fromProtobuf.pod(tc.shape)
			if (err != nil) != (wantErr != nil) || errors.Is(err, duck.ErrNoPodTemplate) != errors.Is(wantErr, duck.ErrNoPodTemplate) {
				t.Fatalf("pod: %v, from JSON: %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod (-from JSON +from protobuf):\n%s", diff)
			}
			if fromProtobuf.deleting(got) != fromJSON.deleting(want) {
				t.Errorf("deleting: %v, from JSON %v", fromProtobuf.deleting(got), fromJSON.deleting(want))
			}
			if err != nil {
				return
			}
			after := got.DeepCopy()
			c := &after.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "B", Value: "2"})
			after.Annotations = map[string]string{"bound": "yes"}
			ops, err := tc.shape.CreatePatch(got, after)
			if err != nil {
				t.Fatal(err)
			}
			wantGuarded, err := fromJSON.guard(ops)
			if err != nil {
				t.Fatal(err)
			}
			gotGuarded, err := fromProtobuf.guard(ops)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(patchJSON(t, wantGuarded), patchJSON(t, gotGuarded)); diff != "" {
				t.Errorf("guarded patch (-from JSON +from protobuf):\n%s", diff)
			}
			wantObj, err := fromJSON.object()
			if err != nil {
				t.Fatal(err)
			}
			gotObj, err := fromProtobuf.object()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantObj, gotObj); diff != "" {
				t.Errorf("object (-from JSON +from protobuf):\n%s", diff)
			}
		})
	}
}

// patchJSON is a JSON patch as the values it holds, decoded.
func patchJSON(t *testing.T, ops []jsonpatch.Operation) []any {
	t.Helper()
	body, err := duck.MarshalPatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	var v []any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
