package bindingtest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/duck"
)

// Subject is one workload a contract check binds and unbinds.
type Subject struct {
	// Name names the subject in failure messages, e.g. "apps/v1 Deployment".
	Name string
	// Shape says where the workload keeps its pod template.
	Shape duck.Shape
	// Object is the workload as an API server stores it, fields the duck
	// type does not know included.
	Object *unstructured.Unstructured
}

// UnknownField is the name of the fields Subjects adds where Go's
// Kubernetes types have none (beside the pod template, inside it, in every
// container and volume, and in the status), standing for the fields a newer
// API server has and a Binding's compiled types lack. A patch that drops
// one would drop those too.
const UnknownField = "bindkitTestUnknownField"

// CustomWorkloadKind is the kind of the custom resource among Subjects,
// whose pod template is at spec.runner.template (CustomWorkloadShape).
var CustomWorkloadKind = schema.GroupVersionKind{Group: "workloads.bindingtest.bindkit.dev", Version: "v1", Kind: "Runner"}

// CustomWorkloadShape is where CustomWorkloadKind keeps its pod template.
func CustomWorkloadShape() duck.Shape { return duck.TemplateAt("spec", "runner", "template") }

// KitNamePrefix begins the name of every container, init container and
// volume Subjects holds ("bindingtest-setup", "bindingtest-app",
// "bindingtest-sidecar", "bindingtest-cache", "bindingtest-config"), so that
// none is the name of one a Binding adds. CheckContract fails a Do that
// adds a container or volume whose name begins with it.
const KitNamePrefix = "bindingtest-"

// Subjects returns one workload of every kind bindkit binds, in namespace
// ns: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, a bare
// Pod, and a custom resource with a pod template at a path of its own
// (CustomWorkloadKind). Each is a full object, as a server returns it:
// labels and annotations on the object and its template, an init container
// and two containers with env, ports, mounts and resources, two volumes (all
// named with KitNamePrefix),
// a status, and UnknownField beside and inside the pod template. Each call
// returns new objects.
func Subjects(ns string) []Subject {
	labels := map[string]string{"app": "web", "tier": "front"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 2,
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"owner": "team-a"},
		}
	}
	template := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"prometheus.io/scrape": "true"}},
			Spec:       podSpec(),
		}
	}
	selector := &metav1.LabelSelector{MatchLabels: labels}
	workloads := []struct {
		name  string
		shape duck.Shape
		obj   runtime.Object
		kind  schema.GroupVersionKind
	}{{
		name: "apps/v1 Deployment", shape: duck.PodSpecable(), kind: appsv1.SchemeGroupVersion.WithKind("Deployment"),
		obj: &appsv1.Deployment{ObjectMeta: meta("deployment"), Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Selector: selector, Template: template()},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, ReadyReplicas: 2}},
	}, {
		name: "apps/v1 StatefulSet", shape: duck.PodSpecable(), kind: appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		obj: &appsv1.StatefulSet{ObjectMeta: meta("statefulset"), Spec: appsv1.StatefulSetSpec{ServiceName: "web", Selector: selector, Template: template()},
			Status: appsv1.StatefulSetStatus{Replicas: 1}},
	}, {
		name: "apps/v1 DaemonSet", shape: duck.PodSpecable(), kind: appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		obj: &appsv1.DaemonSet{ObjectMeta: meta("daemonset"), Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template()},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3}},
	}, {
		name: "apps/v1 ReplicaSet", shape: duck.PodSpecable(), kind: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		obj: &appsv1.ReplicaSet{ObjectMeta: meta("replicaset"), Spec: appsv1.ReplicaSetSpec{Selector: selector, Template: template()},
			Status: appsv1.ReplicaSetStatus{Replicas: 1}},
	}, {
		name: "batch/v1 Job", shape: duck.PodSpecable(), kind: batchv1.SchemeGroupVersion.WithKind("Job"),
		obj: &batchv1.Job{ObjectMeta: meta("job"), Spec: batchv1.JobSpec{Template: jobTemplate(template())},
			Status: batchv1.JobStatus{Active: 1}},
	}, {
		name: "batch/v1 CronJob", shape: duck.CronJob(), kind: batchv1.SchemeGroupVersion.WithKind("CronJob"),
		obj: &batchv1.CronJob{ObjectMeta: meta("cronjob"), Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate(template())}}}},
	}, {
		name: "v1 Pod", shape: duck.Pod(), kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		obj: &corev1.Pod{ObjectMeta: meta("pod"), Spec: podSpec(), Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}}

	var out []Subject
	for _, w := range workloads {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w.obj)
		if err != nil {
			panic(fmt.Sprintf("bindingtest: %s: %v", w.name, err)) // fixed Go values always convert
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(w.kind)
		addUnknownFields(u, w.shape)
		out = append(out, Subject{Name: w.name, Shape: w.shape, Object: u})
	}
	out = append(out, customWorkload(meta("runner"), template()))
	return out
}

// customWorkload is a CustomWorkloadKind whose template sits at
// spec.runner.template, beside fields of its own.
func customWorkload(meta metav1.ObjectMeta, template corev1.PodTemplateSpec) Subject {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
	if err != nil {
		panic(fmt.Sprintf("bindingtest: custom workload: %v", err))
	}
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&template)
	if err != nil {
		panic(fmt.Sprintf("bindingtest: custom workload: %v", err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": m,
		"spec": map[string]any{
			"concurrency": int64(3),
			"runner":      map[string]any{"image": "runner:1", "template": tmpl},
		},
		"status": map[string]any{"runs": int64(12)},
	}}
	u.SetGroupVersionKind(CustomWorkloadKind)
	shape := CustomWorkloadShape()
	addUnknownFields(u, shape)
	return Subject{Name: CustomWorkloadKind.GroupVersion().String() + " " + CustomWorkloadKind.Kind, Shape: shape, Object: u}
}

func jobTemplate(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return t
}

// podSpec is the pod spec of every subject.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{
			Name: "bindingtest-setup", Image: "registry.example/setup:1",
			Command:      []string{"/setup"},
			VolumeMounts: []corev1.VolumeMount{{Name: "bindingtest-cache", MountPath: "/cache"}},
		}},
		Containers: []corev1.Container{{
			Name: "bindingtest-app", Image: "registry.example/web:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			},
			EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "bindingtest-cache", MountPath: "/cache"}, {Name: "bindingtest-config", MountPath: "/etc/web", ReadOnly: true}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}, {
			Name: "bindingtest-sidecar", Image: "registry.example/proxy:1",
			Args: []string{"--port=9090"},
		}},
		Volumes: []corev1.Volume{
			{Name: "bindingtest-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "bindingtest-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: new(int32(0o644)),
			}}},
		},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		DNSPolicy:                     corev1.DNSClusterFirst,
		TerminationGracePeriodSeconds: new(int64(30)),
		ServiceAccountName:            "web",
	}
}

// addUnknownFields puts UnknownField beside the pod template, in it, in its
// metadata and spec, in every container and volume, and in the status,
// each with a value naming where it is.
func addUnknownFields(u *unstructured.Unstructured, shape duck.Shape) {
	set := func(value any, path ...string) {
		parent, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
		if m, ok := parent.(map[string]any); found && err == nil && ok {
			m[UnknownField] = value
		}
	}
	tmpl := shape.Path()
	spec := append(append([]string(nil), tmpl...), "spec")
	if len(tmpl) == 0 { // a Pod: the object is the template
		spec = []string{"spec"}
	}
	set("top level")
	set("in the metadata", "metadata")
	if len(tmpl) > 0 {
		set("beside the template", tmpl[:len(tmpl)-1]...)
		set("in the template", tmpl...)
		set("in the template's metadata", append(append([]string(nil), tmpl...), "metadata")...)
	}
	set("in the pod spec", spec...)
	set("in the status", "status")
	for _, list := range []string{"initContainers", "containers", "volumes"} {
		items, found, err := unstructured.NestedSlice(u.Object, append(append([]string(nil), spec...), list)...)
		if !found || err != nil {
			continue
		}
		for i, item := range items {
			if m, ok := item.(map[string]any); ok {
				m[UnknownField] = fmt.Sprintf("in %s[%d]", list, i)
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, items, append(append([]string(nil), spec...), list)...)
	}
}
