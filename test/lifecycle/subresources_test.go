package lifecycle_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/reconciler/configbinding"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/testenv"
)

// events records what a watch delivers, with the resourceVersion each
// change was stored at: etcd orders every write of the cluster, so two
// resourceVersions say which change came first.
type events struct {
	mu  sync.Mutex
	got []event
}

type event struct {
	kind string // "Deployment" or "ConfigMap"
	typ  watch.EventType
	rv   uint64
	obj  any
}

func (e *events) record(ctx context.Context, kind string, w watch.Interface) {
	go func() {
		<-ctx.Done()
		w.Stop()
	}()
	for ev := range w.ResultChan() {
		m, ok := ev.Object.(metav1.Object)
		if !ok {
			continue
		}
		rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		e.mu.Lock()
		e.got = append(e.got, event{kind: kind, typ: ev.Type, rv: rv, obj: ev.Object})
		e.mu.Unlock()
	}
}

func refersTo(d *appsv1.Deployment, configMap string) bool {
	return slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].EnvFrom, func(s corev1.EnvFromSource) bool {
		return s.ConfigMapRef != nil && s.ConfigMapRef.Name == configMap
	})
}

// Deleting a ConfigBinding unbinds its subjects before its ConfigMap is
// deleted: at no stored moment does a subject refer to a ConfigMap that is
// gone.
func TestSubjectsUnboundBeforeSubResourcesAreDeletedWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	system := env.CreateNamespace(t, "configbinding-system-")
	ns := env.CreateNamespace(t, "configbinding-")
	for _, name := range []string{"web-1", "web-2"} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pod": name}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}}}
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"namespace": ns, "name": "cfg"},
		"spec": map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
			"data":    map[string]any{"LOG_LEVEL": "debug"},
		},
	}}
	created, err := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Create(ctx, b, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	configMap := configbinding.ConfigMapName(created)

	stop := run(t, env, system)
	defer stop()
	poll(t, "both subjects bound", func() bool {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 2 && refersTo(&list.Items[0], configMap) && refersTo(&list.Items[1], configMap)
	})
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns, Kinds: []audit.Kind{configBindingKind}})

	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := &events{}
	dw, err := kube.AppsV1().Deployments(ns).Watch(watchCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cw, err := kube.CoreV1().ConfigMaps(ns).Watch(watchCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go rec.record(watchCtx, "Deployment", dw)
	go rec.record(watchCtx, "ConfigMap", cw)

	if err := dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var deletedAt uint64
	poll(t, "ConfigMap "+configMap+" deleted", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, e := range rec.got {
			if e.kind == "ConfigMap" && e.typ == watch.Deleted && e.obj.(*corev1.ConfigMap).Name == configMap {
				deletedAt = e.rv
				return true
			}
		}
		return false
	})
	// Every Deployment's last state stored before the ConfigMap's deletion
	// no longer refers to it.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	last := map[string]*appsv1.Deployment{}
	lastRV := map[string]uint64{}
	for _, e := range rec.got {
		if d, ok := e.obj.(*appsv1.Deployment); ok && e.rv < deletedAt {
			last[d.Name], lastRV[d.Name] = d, e.rv
		}
	}
	for _, name := range []string{"web-1", "web-2"} {
		d, ok := last[name]
		if !ok {
			t.Errorf("%s: not unbound before the ConfigMap was deleted (at resourceVersion %d)", name, deletedAt)
			continue
		}
		if refersTo(d, configMap) {
			t.Errorf("%s still refers to %s at resourceVersion %d, and the ConfigMap was deleted at %d", name, configMap, lastRV[name], deletedAt)
		}
	}
	// The Binding is gone: its records must be too.
	bindingtest.Audit(t, env, bindingtest.AuditOptions{Namespace: ns})
}

// configBindingKind lets the audit run a ConfigBinding's Do, with the
// name of its ConfigMap in the context as the controller gives it.
var configBindingKind = audit.Kind{Resource: v1alpha1.GroupVersionResource(), Decode: func(u *unstructured.Unstructured) (psbinding.Bindable, error) {
	b := &v1alpha1.ConfigBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("ConfigBinding %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return withConfigMap{b, configbinding.ConfigMapName(b)}, nil
}}

// withConfigMap is a ConfigBinding whose Do and Undo know its ConfigMap.
type withConfigMap struct {
	*v1alpha1.ConfigBinding
	configMap string
}

func (b withConfigMap) Do(ctx context.Context, wp *duck.WithPod) {
	b.ConfigBinding.Do(v1alpha1.WithConfigMapName(ctx, b.configMap), wp)
}

func (b withConfigMap) Undo(ctx context.Context, wp *duck.WithPod) {
	b.ConfigBinding.Undo(v1alpha1.WithConfigMapName(ctx, b.configMap), wp)
}

// run runs the configbinding controller and webhook in process through
// sharedmain, as its main does, and returns what stops them.
func run(t *testing.T, env *testenv.Environment, system string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// No webhook configuration reaches this webhook (the test is the
	// reconciler's), so no one needs its port: the kernel picks it.
	ctx = sharedmain.WithFlags(ctx, sharedmain.Flags{
		Kubeconfig: env.KubeconfigPath, DisableHA: true,
		WebhookAddress: "127.0.0.1", WebhookPort: sharedmain.AnyPort, WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")},
		WebhookGracePeriod: -1, MetricsAddress: "127.0.0.1:0",
	})
	ctx = injection.WithSystemNamespace(ctx, system)
	ctx = sharedmain.WithLogOutput(ctx, zapcore.AddSync(&testWriter{t: t}))
	binding, err := configbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- sharedmain.Run(ctx, "configbinding-controller", binding.Controller, binding.Webhook)
	}()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sharedmain.Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("sharedmain.Run did not return within a minute of cancellation")
		}
	}
}

// testWriter sends the process's log lines to the test's log, while the
// test runs.
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.t.Failed() {
		return len(p), nil // quiet unless something failed
	}
	w.t.Log(string(p))
	return len(p), nil
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
