package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

var githubBindings = schema.GroupVersionResource{Group: "bindings.bindkit.dev", Version: "v1alpha1", Resource: "githubbindings"}

const (
	// volumeName and mountPath are what a GithubBinding adds to a pod.
	volumeName = "github-binding"
	mountPath  = "/var/bindings/github"
	// rolloutTimeout bounds each wait for pods to roll: the reconciler, the
	// workload controllers, the scheduler and kwok each act in about a
	// second, but the machine may be busy.
	rolloutTimeout = 2 * time.Minute
)

// startController builds the example controller and runs it until the
// test ends, with default flags but those that put its webhook on loopback,
// as the demo does.
func startController(t *testing.T, env *testenv.Environment) {
	t.Helper()
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binary := filepath.Join(t.TempDir(), "githubbinding-controller")
	if err := demo.BuildController(ctx, "../..", binary); err != nil {
		t.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary, "--disable-ha")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctrl.Stop(); err != nil {
			t.Errorf("stop controller: %v\n%s", err, ctrl.LogTail(30))
		}
	})
	// Pointed at the port the controller reported: it binds one the kernel
	// picks. (Deleted before the controller stops: cleanups run last
	// first.)
	cfg, err := demo.WebhookConfiguration("../..", ctrl.WebhookPort)
	if err != nil {
		t.Fatal(err)
	}
	configs := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := configs.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { configs.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
	if err := demo.WaitReady(ctx, kube, ctrl.WebhookPort, time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, ctrl.LogTail(30))
	}
}

// workload is a kind of subject whose pods the test watches roll.
type workload struct {
	kind string
	// create makes the workload name in ns with template.
	create func(ctx context.Context, kube kubernetes.Interface, ns, name string, template corev1.PodTemplateSpec) error
	// get returns the workload's current pod template, and whether its
	// status says the rollout of that template is complete.
	get func(ctx context.Context, kube kubernetes.Interface, ns, name string) (corev1.PodTemplateSpec, bool, error)
	// pods is how many pods a finished rollout has.
	pods int
}

const replicas = 2

func workloads() []workload {
	r := int32(replicas)
	return []workload{{
		kind: "Deployment",
		pods: replicas,
		create: func(ctx context.Context, kube kubernetes.Interface, ns, name string, template corev1.PodTemplateSpec) error {
			_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       appsv1.DeploymentSpec{Replicas: &r, Selector: selector(name), Template: template},
			}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, kube kubernetes.Interface, ns, name string) (corev1.PodTemplateSpec, bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return corev1.PodTemplateSpec{}, false, err
			}
			s := d.Status
			return d.Spec.Template, s.ObservedGeneration == d.Generation && s.UpdatedReplicas == r && s.AvailableReplicas == r && s.Replicas == r, nil
		},
	}, {
		kind: "StatefulSet",
		pods: replicas,
		create: func(ctx context.Context, kube kubernetes.Interface, ns, name string, template corev1.PodTemplateSpec) error {
			_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       appsv1.StatefulSetSpec{Replicas: &r, Selector: selector(name), Template: template},
			}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, kube kubernetes.Interface, ns, name string) (corev1.PodTemplateSpec, bool, error) {
			s, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return corev1.PodTemplateSpec{}, false, err
			}
			st := s.Status
			return s.Spec.Template, st.ObservedGeneration == s.Generation && st.UpdatedReplicas == r && st.ReadyReplicas == r &&
				st.CurrentRevision == st.UpdateRevision, nil
		},
	}, {
		kind: "DaemonSet",
		pods: 2, // one a fake node
		create: func(ctx context.Context, kube kubernetes.Interface, ns, name string, template corev1.PodTemplateSpec) error {
			_, err := kube.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       appsv1.DaemonSetSpec{Selector: selector(name), Template: template},
			}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, kube kubernetes.Interface, ns, name string) (corev1.PodTemplateSpec, bool, error) {
			d, err := kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return corev1.PodTemplateSpec{}, false, err
			}
			s := d.Status
			return d.Spec.Template, s.ObservedGeneration == d.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
				s.NumberReady == s.DesiredNumberScheduled && s.DesiredNumberScheduled == 2, nil
		},
	}}
}

func selector(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
}

func template(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
}

func unbound(spec *corev1.PodSpec) bool {
	if slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName }) {
		return false
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volumeName }) {
			return false
		}
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// drift returns how the parts of a pod's spec that come from its
// workload's template differ from the template: the containers (images,
// mounts, everything) and the volumes.
func drift(template corev1.PodSpec, pod corev1.PodSpec) string {
	type view struct {
		InitContainers, Containers []corev1.Container
		Volumes                    []corev1.Volume
	}
	return cmp.Diff(view{template.InitContainers, template.Containers, template.Volumes},
		view{pod.InitContainers, pod.Containers, pod.Volumes})
}

// waitRolledOut waits until the workload's status says its rollout is
// complete and its pods are exactly the wanted number, all Ready, bound as
// want says, and equal to the template. It returns the pods.
func waitRolledOut(t *testing.T, kube kubernetes.Interface, w workload, ns, name string, wantBound bool) []corev1.Pod {
	t.Helper()
	var last string
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		tmpl, done, err := w.get(ctx, kube, ns, name)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if b := demo.Bound(&tmpl.Spec); b != wantBound || (!wantBound && !unbound(&tmpl.Spec)) {
			last = fmt.Sprintf("template bound=%v", b)
			return false, nil
		}
		if !done {
			last = "status: rollout not complete"
			return false, nil
		}
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pods = list.Items
		if len(pods) != w.pods {
			last = fmt.Sprintf("%d pods, want %d", len(pods), w.pods)
			return false, nil
		}
		for i := range pods {
			p := &pods[i]
			switch {
			case p.DeletionTimestamp != nil:
				last = "pod " + p.Name + " terminating"
			case !podReady(p) || p.Spec.NodeName == "":
				last = "pod " + p.Name + " not scheduled and Ready"
			case wantBound && !demo.Bound(&p.Spec), !wantBound && !unbound(&p.Spec):
				last = fmt.Sprintf("pod %s: bound=%v, want %v", p.Name, demo.Bound(&p.Spec), wantBound)
			case drift(tmpl.Spec, p.Spec) != "":
				last = fmt.Sprintf("pod %s differs from the template (-template +pod):\n%s", p.Name, drift(tmpl.Spec, p.Spec))
			default:
				continue
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s rolled out with bound=%v: %v; last: %s", w.kind, ns, name, wantBound, err, last)
	}
	return pods
}

// TestBindingRollsPods binds each kind of workload with a GithubBinding
// through the example controller and checks that the pods that run carry
// the Binding and match the template, then deletes the Binding and checks
// that the pods roll back.
func TestBindingRollsPods(t *testing.T) {
	env := controlPlane.Env(t)
	startController(t, env)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)

	for _, w := range workloads() {
		t.Run(w.kind, func(t *testing.T) {
			ctx := t.Context()
			ns := env.CreateNamespace(t, "e2e-")
			if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "github-token"},
				StringData: map[string]string{"token": "not-a-real-token"},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create secret: %v", err)
			}
			name := "web"
			if err := w.create(ctx, kube, ns, name, template(name)); err != nil {
				t.Fatalf("create %s: %v", w.kind, err)
			}
			before := waitRolledOut(t, kube, w, ns, name, false)

			binding := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": githubBindings.GroupVersion().String(), "kind": "GithubBinding",
				"metadata": map[string]any{"name": "gh"},
				"spec": map[string]any{
					"subject": map[string]any{"apiVersion": "apps/v1", "kind": w.kind, "name": name},
					"secret":  map[string]any{"name": "github-token"},
				},
			}}
			if _, err := dyn.Resource(githubBindings).Namespace(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create GithubBinding: %v", err)
			}
			boundPods := waitRolledOut(t, kube, w, ns, name, true)
			if overlap := sharedUIDs(before, boundPods); len(overlap) > 0 {
				t.Errorf("pods %v ran before the Binding and still run bound: pods were mutated, not replaced", overlap)
			}
			auditNamespace(t, env, ns)

			if err := dyn.Resource(githubBindings).Namespace(ns).Delete(ctx, "gh", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete GithubBinding: %v", err)
			}
			after := waitRolledOut(t, kube, w, ns, name, false)
			t.Logf("pods before the Binding %v, bound %v, after its delete %v", podNames(before), podNames(boundPods), podNames(after))
			if overlap := sharedUIDs(boundPods, after); len(overlap) > 0 {
				t.Errorf("bound pods %v still run after the Binding's delete", overlap)
			}
			auditNamespace(t, env, ns)
		})
	}
}

func sharedUIDs(a, b []corev1.Pod) []string {
	var out []string
	for _, p := range a {
		if slices.ContainsFunc(b, func(q corev1.Pod) bool { return q.UID == p.UID }) {
			out = append(out, p.Name)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.NodeName)
	}
	return out
}
