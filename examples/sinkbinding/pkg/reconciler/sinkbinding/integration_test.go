package sinkbinding_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// repoRoot is the repository, from this package.
const repoRoot = "../../../../.."

var controlPlane = testenv.Shared{Options: testenv.Options{CRDPaths: []string{"../../../config/300-sinkbinding.yaml"}}}

func TestMain(m *testing.M) { controlPlane.Main(m) }

var sinkBindings = v1alpha1.GroupVersionResource()

// shape is one built-in workload kind: an object of it in a namespace,
// and where its pod spec is.
type shape struct {
	gvr     schema.GroupVersionResource
	object  func(namespace, name string, labels map[string]string) runtime.Object
	podSpec []string
}

var web = map[string]string{"app": "web"}

// shapes are every built-in workload shape, with an init container and
// two containers each.
var shapes = map[string]shape{
	"Deployment": {appsv1.SchemeGroupVersion.WithResource("deployments"), func(ns, name string, l map[string]string) runtime.Object {
		return &appsv1.Deployment{TypeMeta: typeMeta("apps/v1", "Deployment"), ObjectMeta: meta(ns, name, l),
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: template(l, "")}}
	}, []string{"spec", "template", "spec"}},
	"StatefulSet": {appsv1.SchemeGroupVersion.WithResource("statefulsets"), func(ns, name string, l map[string]string) runtime.Object {
		return &appsv1.StatefulSet{TypeMeta: typeMeta("apps/v1", "StatefulSet"), ObjectMeta: meta(ns, name, l),
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: template(l, "")}}
	}, []string{"spec", "template", "spec"}},
	"DaemonSet": {appsv1.SchemeGroupVersion.WithResource("daemonsets"), func(ns, name string, l map[string]string) runtime.Object {
		return &appsv1.DaemonSet{TypeMeta: typeMeta("apps/v1", "DaemonSet"), ObjectMeta: meta(ns, name, l),
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: template(l, "")}}
	}, []string{"spec", "template", "spec"}},
	"ReplicaSet": {appsv1.SchemeGroupVersion.WithResource("replicasets"), func(ns, name string, l map[string]string) runtime.Object {
		return &appsv1.ReplicaSet{TypeMeta: typeMeta("apps/v1", "ReplicaSet"), ObjectMeta: meta(ns, name, l),
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: template(l, "")}}
	}, []string{"spec", "template", "spec"}},
	"Job": {batchv1.SchemeGroupVersion.WithResource("jobs"), func(ns, name string, l map[string]string) runtime.Object {
		return &batchv1.Job{TypeMeta: typeMeta("batch/v1", "Job"), ObjectMeta: meta(ns, name, l),
			Spec: batchv1.JobSpec{Template: template(l, corev1.RestartPolicyOnFailure)}}
	}, []string{"spec", "template", "spec"}},
	"CronJob": {batchv1.SchemeGroupVersion.WithResource("cronjobs"), func(ns, name string, l map[string]string) runtime.Object {
		return &batchv1.CronJob{TypeMeta: typeMeta("batch/v1", "CronJob"), ObjectMeta: meta(ns, name, l),
			Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template(l, corev1.RestartPolicyOnFailure)}}}}
	}, []string{"spec", "jobTemplate", "spec", "template", "spec"}},
	"Pod": {corev1.SchemeGroupVersion.WithResource("pods"), func(ns, name string, l map[string]string) runtime.Object {
		return &corev1.Pod{TypeMeta: typeMeta("v1", "Pod"), ObjectMeta: meta(ns, name, l), Spec: template(l, "").Spec}
	}, []string{"spec"}},
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func meta(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
}

func template(labels map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
		RestartPolicy:  restart,
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		Containers: []corev1.Container{
			{Name: "app", Image: "nginx", Env: []corev1.EnvVar{{Name: "OWN", Value: "1"}}},
			{Name: "side", Image: "envoy"},
		},
	}}
}

func sinkBinding(namespace, name string, subject map[string]any, sink string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sinkBindings.GroupVersion().String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"subject": subject, "sink": sink, "caCertsSecret": "sink-ca"},
	}}
}

// bound reports how obj, as the API server returned it, was bound: "" when
// every container and init container has K_SINK=sink once, the CA
// volume is there and the bound annotation names binding; otherwise what
// is missing or doubled. unbound reports whether none of it is there.
func bound(obj *unstructured.Unstructured, podSpec []string, binding, sink string) (problem string, unbound bool) {
	m, _, err := unstructured.NestedMap(obj.Object, podSpec...)
	if err != nil {
		return err.Error(), false
	}
	ps := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ps); err != nil {
		return err.Error(), false
	}
	var problems []string
	found := 0
	for _, c := range append(append([]corev1.Container(nil), ps.InitContainers...), ps.Containers...) {
		n := 0
		for _, e := range c.Env {
			if e.Name == v1alpha1.SinkEnv {
				n++
				found++
				if e.Value != sink {
					problems = append(problems, fmt.Sprintf("container %s: K_SINK=%q, want %q", c.Name, e.Value, sink))
				}
			}
		}
		if n != 1 {
			problems = append(problems, fmt.Sprintf("container %s has K_SINK %d times", c.Name, n))
		}
	}
	volumes := 0
	for _, v := range ps.Volumes {
		if v.Name == v1alpha1.CACertsVolume {
			volumes++
		}
	}
	if volumes != 1 {
		problems = append(problems, fmt.Sprintf("volume %s %d times", v1alpha1.CACertsVolume, volumes))
	}
	record := obj.GetAnnotations()[duck.BoundAnnotation]
	if _, ok := duck.BoundOf(obj.GetAnnotations()).Lookup(duck.BoundBy{Resource: sinkBindings.GroupResource(), Name: binding}); !ok {
		problems = append(problems, fmt.Sprintf("bound annotation %q does not name %s", record, binding))
	}
	return strings.Join(problems, "; "), found == 0 && volumes == 0 && record == ""
}

// TestSinkBindingWithoutWebhookThroughExampleBinary runs the sinkbinding
// example binary with its default flags against a kube-apiserver that
// serves MutatingAdmissionPolicy. It checks that subjects of every
// workload shape are bound at admission by the policy once a probe saw it
// in force and the webhook left the path, honouring namespace isolation and the exclude label on
// subjects and namespaces; that the reconciler binds a subject that
// existed before its Binding; that a server-side dry run through the
// policy gives the same object as one through the webhook (the same
// binary with --declarative-admission=webhook); that no subject created
// while the process switches from policy to webhook and back is left
// unbound or bound twice; and that deleting a Binding unbinds its subjects.
func TestSinkBindingWithoutWebhookThroughExampleBinary(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sink-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sink-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sink-optout", Labels: map[string]string{psbinding.ExcludeLabel: "true"}}},
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Installed once the first process reports its port (start).
	cfgPath := filepath.Join(root, "examples/sinkbinding/config/500-webhook-configuration.yaml")
	cfg, err := demo.WebhookConfigurationAt(cfgPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	binary, err := demo.BuiltFor(env, root, "./examples/sinkbinding/cmd/controller", "sinkbinding-controller")
	if err != nil {
		t.Fatal(err)
	}
	create := func(ctx context.Context, ns string, obj runtime.Object, dryRun bool) (*unstructured.Unstructured, error) {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: content}
		opts := metav1.CreateOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		gvr, err := resourceOf(u)
		if err != nil {
			return nil, err
		}
		return dyn.Resource(gvr).Namespace(ns).Create(ctx, u, opts)
	}

	// A Deployment from before its Binding: the reconciler's.
	const sinkA = "https://sink.example.com/a"
	if _, err := create(ctx, "sink-a", shapes["Deployment"].object("sink-a", "before", web), false); err != nil {
		t.Fatal(err)
	}
	// One Binding per shape in sink-a by selector, one naming a
	// Deployment, one in the opted-out namespace, and one naming another
	// namespace.
	bindingOf := map[string]string{}
	for kind, s := range shapes {
		u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(s.object("", "", nil))
		subject := map[string]any{"apiVersion": u["apiVersion"], "kind": kind, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}
		bindingOf[kind] = "sink-" + strings.ToLower(kind)
		if _, err := dyn.Resource(sinkBindings).Namespace("sink-a").Create(ctx, sinkBinding("sink-a", bindingOf[kind], subject, sinkA), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deploymentSubject := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}
	for _, b := range []*unstructured.Unstructured{
		sinkBinding("sink-a", "sink-byname", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "named"}, sinkA),
		sinkBinding("sink-optout", "sink", deploymentSubject, sinkA),
		sinkBinding("sink-b", "elsewhere", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "target", "namespace": "sink-a"}, sinkA),
	} {
		_, err := dyn.Resource(sinkBindings).Namespace(b.GetNamespace()).Create(ctx, b, metav1.CreateOptions{})
		if b.GetName() == "elsewhere" && err != nil && strings.Contains(err.Error(), "binds subjects only in its own namespace (sink-b)") {
			// The namespace guard an earlier process of this package's
			// tests programmed refuses it at create; without the guard,
			// both paths still leave sink-a alone (checked below).
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	// Each process binds a port the kernel picks; the configuration is
	// created at the first one's webhook and pointed at each next one's.
	start := func(args ...string) *demo.Controller {
		t.Helper()
		ctrl, err := demo.StartController(env, binary, args...)
		if err != nil {
			t.Fatal(err)
		}
		if ctrl.WebhookPort != 0 {
			if cfg, err = demo.WebhookConfigurationAt(cfgPath, ctrl.WebhookPort); err == nil {
				err = demo.InstallWebhookConfiguration(ctx, kube, cfg)
			}
			if err != nil {
				ctrl.Kill()
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			if exited, _ := ctrl.Exited(); !exited {
				ctrl.Kill()
			}
			if t.Failed() {
				t.Logf("controller log:\n%s", ctrl.LogTail(40))
			}
			if n := strings.Count(ctrl.Log(), `"action":"restored"`); n > 0 {
				t.Errorf("the controller restored admission objects %d times with nobody editing them: its desired objects lack the API server's defaults", n)
			}
		})
		return ctrl
	}
	stop := func(ctrl *demo.Controller) {
		t.Helper()
		if err := ctrl.Stop(); err != nil {
			t.Errorf("stop controller: %v\n%s", err, ctrl.LogTail(40))
		}
	}
	mapAPI := kube.AdmissionregistrationV1().MutatingAdmissionPolicies()
	webhookRules := func() (int, error) {
		cfg, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, cfg.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return len(cfg.Webhooks[0].Rules), nil
	}
	policyName := policy.MutatingPolicyName(sinkBindings.GroupResource())
	// boundAtAdmission polls until a dry-run create of every shape in
	// sink-a comes back bound by its Binding, so the path in force is
	// loaded for each: the
	// kube-apiserver loads each Binding's policy binding, and each
	// published Binding, on its own, and a Binding published after the
	// process saw the policy in force was not among those it probed with.
	boundAtAdmission := func(what string) {
		t.Helper()
		poll(t, what, func() (string, error) {
			for _, kind := range slices.Sorted(maps.Keys(shapes)) {
				s := shapes[kind]
				got, err := create(ctx, "sink-a", s.object("sink-a", "probe", web), true)
				if err != nil {
					return kind + ": " + err.Error(), nil
				}
				if problem, _ := bound(got, s.podSpec, bindingOf[kind], sinkA); problem != "" {
					return kind + ": " + problem, nil
				}
			}
			return "", nil
		})
	}

	// By policy, with the default flags.
	ctrl := start()
	poll(t, "the process to admit by policy and the webhook to be out of the path", func() (string, error) {
		if !strings.Contains(ctrl.Log(), "admission by MutatingAdmissionPolicy") {
			return "log does not say it admits by policy", nil
		}
		if _, err := mapAPI.Get(ctx, policyName, metav1.GetOptions{}); err != nil {
			return err.Error(), nil
		}
		n, err := webhookRules()
		return map[bool]string{true: "", false: "webhook still has rules"}[n == 0], err
	})
	boundAtAdmission("the policy to bind at admission")
	if ctrl.Addresses.Webhook == "" {
		t.Errorf("no webhook listener reported (%+v): admitting by policy, the kind's webhook admits until the policy is seen in force", ctrl.Addresses)
	}
	if !strings.Contains(ctrl.Log(), "admission policy seen in force: the webhook leaves the path") {
		t.Errorf("the webhook left the path before a probe saw the policy in force:\n%s", ctrl.LogTail(40))
	}

	byPolicy := map[string]map[string]any{}
	for kind, s := range shapes {
		t.Run("policy/"+kind, func(t *testing.T) {
			name := "new-" + strings.ToLower(kind)
			got, err := create(ctx, "sink-a", s.object("sink-a", name, web), false)
			if err != nil {
				t.Fatal(err)
			}
			if problem, _ := bound(got, s.podSpec, bindingOf[kind], sinkA); problem != "" {
				t.Errorf("%s sink-a/%s created with its Binding in force: %s", kind, name, problem)
			}
			dry, err := create(ctx, "sink-a", s.object("sink-a", name+"-dry", web), true)
			if err != nil {
				t.Fatal(err)
			}
			if problem, _ := bound(dry, s.podSpec, bindingOf[kind], sinkA); problem != "" {
				t.Errorf("%s sink-a/%s created by dry run: %s", kind, name+"-dry", problem)
			}
			byPolicy[kind] = bindingtest.Comparable(dry)
		})
	}
	poll(t, "the policy to bind the Deployment sink-byname names", func() (string, error) {
		got, err := create(ctx, "sink-a", shapes["Deployment"].object("sink-a", "named", map[string]string{"app": "named"}), true)
		if err != nil {
			return err.Error(), nil
		}
		problem, _ := bound(got, shapes["Deployment"].podSpec, "sink-byname", sinkA)
		return problem, nil
	})
	named, err := create(ctx, "sink-a", shapes["Deployment"].object("sink-a", "named", map[string]string{"app": "named"}), false)
	if err != nil {
		t.Fatal(err)
	}
	if problem, _ := bound(named, shapes["Deployment"].podSpec, "sink-byname", sinkA); problem != "" {
		t.Errorf("Deployment sink-a/named, its Binding naming it: %s", problem)
	}
	for _, tc := range []struct {
		name, ns, object string
		labels           map[string]string
	}{
		{"subject labelled exclude", "sink-a", "excluded", map[string]string{"app": "web", psbinding.ExcludeLabel: "true"}},
		{"namespace labelled exclude", "sink-optout", "web", web},
		{"subject named by a Binding of another namespace", "sink-a", "target", map[string]string{"app": "target"}},
	} {
		got, err := create(ctx, tc.ns, shapes["Deployment"].object(tc.ns, tc.object, tc.labels), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, unbound := bound(got, shapes["Deployment"].podSpec, "", ""); !unbound {
			t.Errorf("%s: Deployment %s/%s was bound: %v", tc.name, tc.ns, tc.object, got.Object["spec"])
		}
	}
	poll(t, "the reconciler to bind the Deployment that existed before its Binding", func() (string, error) {
		got, err := dyn.Resource(shapes["Deployment"].gvr).Namespace("sink-a").Get(ctx, "before", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		problem, _ := bound(got, shapes["Deployment"].podSpec, bindingOf["Deployment"], sinkA)
		return problem, nil
	})

	// Subjects created without a pause while the process switches from
	// policy to webhook and back: each one the API server accepts must be
	// bound once (a create refused while neither path is ready is
	// retried by its client; one left unbound is not).
	var (
		mu       sync.Mutex
		accepted int
		failures []string
	)
	creating, stopCreating := context.WithCancel(ctx)
	var creators sync.WaitGroup
	creators.Go(func() {
		for i := 0; creating.Err() == nil; i++ {
			name := fmt.Sprintf("switch-%d", i)
			got, err := create(creating, "sink-a", shapes["Deployment"].object("sink-a", name, web), false)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			problem, _ := bound(got, shapes["Deployment"].podSpec, bindingOf["Deployment"], sinkA)
			mu.Lock()
			accepted++
			if problem != "" {
				failures = append(failures, name+": "+problem)
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})

	stop(ctrl)
	ctrl = start("--declarative-admission=webhook")
	poll(t, "the process to admit by webhook and remove the policy", func() (string, error) {
		if !strings.Contains(ctrl.Log(), "admission by webhook") {
			return "log does not say it admits by webhook", nil
		}
		if _, err := mapAPI.Get(ctx, policyName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("policy still there (%v)", err), nil
		}
		n, err := webhookRules()
		return map[bool]string{true: "", false: "webhook has no rules"}[n > 0], err
	})
	boundAtAdmission("the webhook to bind at admission")
	for kind, s := range shapes {
		t.Run("webhook/"+kind, func(t *testing.T) {
			name := "new-" + strings.ToLower(kind) + "-dry"
			dry, err := create(ctx, "sink-a", s.object("sink-a", name, web), true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(byPolicy[kind], bindingtest.Comparable(dry)); diff != "" {
				t.Errorf("%s created by dry run: through the policy vs through the webhook (-policy +webhook):\n%s", kind, diff)
			}
		})
	}

	stop(ctrl)
	ctrl = start()
	poll(t, "the process to admit by policy again", func() (string, error) {
		if _, err := mapAPI.Get(ctx, policyName, metav1.GetOptions{}); err != nil {
			return err.Error(), nil
		}
		n, err := webhookRules()
		return map[bool]string{true: "", false: "webhook still has rules"}[n == 0], err
	})
	boundAtAdmission("the policy to bind at admission again")
	time.Sleep(time.Second) // some creates with the policy alone in force
	stopCreating()
	creators.Wait()
	mu.Lock()
	if accepted == 0 {
		t.Errorf("no subject was created during the switches")
	}
	for _, f := range failures {
		t.Errorf("created during a switch: %s", f)
	}
	t.Logf("%d subjects created during the switches, all bound once", accepted)
	mu.Unlock()

	// Deleting the Deployments' Binding unbinds them, those the policy
	// bound included.
	if err := dyn.Resource(sinkBindings).Namespace("sink-a").Delete(ctx, bindingOf["Deployment"], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"before", "new-deployment"} {
		poll(t, "the reconciler to unbind Deployment sink-a/"+name, func() (string, error) {
			got, err := dyn.Resource(shapes["Deployment"].gvr).Namespace("sink-a").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			if _, unbound := bound(got, shapes["Deployment"].podSpec, "", ""); !unbound {
				return "still bound", nil
			}
			return "", nil
		})
	}
	for _, ns := range []string{"sink-a", "sink-b", "sink-optout"} {
		bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
	}
	stop(ctrl)
}

// resourceOf maps a built-in workload object to its resource.
func resourceOf(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	for kind, s := range shapes {
		if u.GetKind() == kind {
			return s.gvr, nil
		}
	}
	return schema.GroupVersionResource{}, errors.New("no resource for kind " + u.GetKind())
}

// poll calls check until it returns "" or a minute passes.
func poll(t *testing.T, what string, check func() (string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		problem, err := check()
		if err != nil {
			return false, err
		}
		last = problem
		return problem == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, last)
	}
}
