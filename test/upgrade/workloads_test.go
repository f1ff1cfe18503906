package upgrade

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/psbinding"
)

var githubBindings = v1alpha1.GroupVersionResource()

// createDeployment creates a one-replica Deployment labelled app=app,
// whose pod is labelled name=<name>.
func createDeployment(ctx context.Context, kube kubernetes.Interface, ns, name, app string) error {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
	_, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	return err
}

// workload is what the test reads of a Deployment: its generation, the
// records bindkit keeps on it, the secret its template mounts, whether
// its rollout is done, and the pods and ReplicaSets that run it.
type workload struct {
	App        string
	Generation int64
	Records    map[string]string
	Secret     string      // the Binding's volume's secret, "" when unbound
	Done       bool        // status: the template rolled out, one pod, Ready
	Pods       []types.UID // the pods running, not those going
	ReplicaSet []string
}

// snapshot reads every Deployment of ns, with its pods and ReplicaSets.
func snapshot(ctx context.Context, kube kubernetes.Interface, ns string) (map[string]workload, error) {
	ds, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	rss, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]workload{}
	for i := range ds.Items {
		d := &ds.Items[i]
		s := d.Status
		out[d.Name] = workload{
			App: d.Labels["app"], Generation: d.Generation, Records: records(d.Annotations), Secret: secretOf(&d.Spec.Template.Spec),
			Done: s.ObservedGeneration == d.Generation && s.UpdatedReplicas == 1 && s.AvailableReplicas == 1 && s.Replicas == 1,
		}
	}
	for _, p := range pods.Items {
		w, ok := out[p.Labels["name"]]
		if !ok {
			continue
		}
		if p.DeletionTimestamp != nil || !podReady(&p) {
			w.Done = false // a rollout's last pod still going, or a new one not Ready
		}
		if p.DeletionTimestamp == nil {
			w.Pods = append(w.Pods, p.UID)
		}
		out[p.Labels["name"]] = w
	}
	for _, rs := range rss.Items {
		if owner := metav1.GetControllerOf(&rs); owner != nil {
			if w, ok := out[owner.Name]; ok {
				w.ReplicaSet = append(w.ReplicaSet, rs.Name)
				out[owner.Name] = w
			}
		}
	}
	for name, w := range out {
		slices.Sort(w.Pods)
		slices.Sort(w.ReplicaSet)
		out[name] = w
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// records are the record annotations of a subject.
func records(ann map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{duck.BoundAnnotation, duck.RolloutAnnotation, duck.HeldAnnotation, duck.RollbackAnnotation} {
		if v, ok := ann[k]; ok {
			out[k] = v
		}
	}
	return out
}

// secretOf is the secret of the GithubBinding's volume in spec.
func secretOf(spec *corev1.PodSpec) string {
	for _, v := range spec.Volumes {
		if v.Name == v1alpha1.VolumeName && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

// ofApp returns the names of the workloads labelled app, sorted.
func ofApp(ws map[string]workload, app string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(ws)) {
		if ws[name].App == app {
			out = append(out, name)
		}
	}
	return out
}

// settled says what keeps ns's workloads from being settled ("" when
// none): each rolled out, its one pod Ready and running its template.
func settled(ctx context.Context, kube kubernetes.Interface, ns string) (string, error) {
	ws, err := snapshot(ctx, kube, ns)
	if err != nil {
		return "", err
	}
	var behind []string
	for _, name := range slices.Sorted(maps.Keys(ws)) {
		if w := ws[name]; !w.Done || len(w.Pods) != 1 {
			behind = append(behind, fmt.Sprintf("%s(%d pods)", name, len(w.Pods)))
		}
	}
	if len(behind) > 0 {
		return "not rolled out: " + strings.Join(behind, ", "), nil
	}
	return "", nil
}

// createBinding creates GithubBinding name in ns for the Deployments
// labelled app=app, mounting secret, with annotations (a rollout policy).
func createBinding(ctx context.Context, dyn dynamic.Interface, ns, name, app, secret string, annotations map[string]any) error {
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": githubBindings.GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": annotations},
		"spec": map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": app}}},
			"secret":  map[string]any{"name": secret},
		},
	}}
	_, err := dyn.Resource(githubBindings).Namespace(ns).Create(ctx, b, metav1.CreateOptions{})
	return err
}

// patchBinding merge-patches GithubBinding ns/name.
func patchBinding(ctx context.Context, dyn dynamic.Interface, ns, name, patch string) error {
	_, err := dyn.Resource(githubBindings).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// binding reads GithubBinding ns/name.
func binding(ctx context.Context, dyn dynamic.Interface, ns, name string) (*v1alpha1.GithubBinding, error) {
	u, err := dyn.Resource(githubBindings).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	b := &v1alpha1.GithubBinding{}
	return b, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b)
}

// ready says why GithubBinding ns/name is not Ready at its generation
// ("" when it is).
func ready(ctx context.Context, dyn dynamic.Interface, ns, name string) (string, error) {
	b, err := binding(ctx, dyn, ns, name)
	if err != nil {
		return "", err
	}
	c := b.Status.GetCondition(duck.ConditionReady)
	switch {
	case b.Status.ObservedGeneration != b.Generation:
		return fmt.Sprintf("%s observed generation %d of %d", name, b.Status.ObservedGeneration, b.Generation), nil
	case c == nil || c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("%s not Ready: %+v", name, c), nil
	}
	return "", nil
}

// boundBy is how GithubBinding b appears in its subjects' records.
func boundBy(b *v1alpha1.GithubBinding) duck.BoundBy {
	return duck.BoundBy{Resource: githubBindings.GroupResource(), Name: b.Name, UID: b.UID}
}

// recordedAt returns the generation of by that the workload's bound
// record names, and whether it names by.
func recordedAt(w workload, by duck.BoundBy) (int64, bool) {
	return duck.BoundGeneration(w.Records, by)
}

// pausedAnnotation pauses a Binding's rollout.
const pausedAnnotation = psbinding.RolloutPausedAnnotation
