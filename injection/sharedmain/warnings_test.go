package sharedmain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/configmap"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
	"github.com/bindkit/bindkit/injection"
)

// TestWarningLogLogsEachTextOnce: a text logged once, whatever the agent;
// codes other than 299 dropped; past maxWarningTexts texts, every warning
// logged and none remembered.
func TestWarningLogLogsEachTextOnce(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	w := newWarningLog(zap.New(core))
	w.HandleWarningHeader(299, "kube-apiserver", "a")
	w.HandleWarningHeader(299, "-", "a")
	w.HandleWarningHeader(299, "-", "b")
	w.HandleWarningHeader(199, "-", "c")
	w.HandleWarningHeader(299, "-", "")
	var got []string
	for _, e := range logs.TakeAll() {
		got = append(got, fmt.Sprintf("%s %v", e.Level, e.ContextMap()))
	}
	want := []string{
		"warn map[agent:kube-apiserver repeats:logged once per process warning:a]",
		"warn map[repeats:logged once per process warning:b]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
	for i := range maxWarningTexts {
		w.HandleWarningHeader(299, "-", fmt.Sprint("text ", i))
	}
	logs.TakeAll()
	w.HandleWarningHeader(299, "-", "over")
	w.HandleWarningHeader(299, "-", "over")
	if n := logs.Len(); n != 2 || len(w.seen) != maxWarningTexts {
		t.Errorf("past the bound: %d lines for a text sent twice, %d texts remembered; want 2 and %d", n, len(w.seen), maxWarningTexts)
	}
}

// TestKubeAPIServerWarningsLoggedOnceWithRealAPIServer runs the shared main
// against the real kube-apiserver and writes, through the process's own
// client, three Deployments whose sidecar repeats the app's container
// port: the kube-apiserver warns at each write, and the process's log
// holds each warning once.
func TestKubeAPIServerWarningsLoggedOnceWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	systemNS := createNamespace(t, kube, "warnings-system-")
	appNS := createNamespace(t, kube, "warnings-app-")

	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ctx = WithFlags(ctx, onAnyPort(t, Flags{Kubeconfig: env.KubeconfigPath, DisableHA: true}))
	ctx = injection.WithSystemNamespace(ctx, systemNS)
	ctx = WithLogOutput(ctx, logs)
	clients := make(chan kubernetes.Interface, 1)
	ctor := func(ctx context.Context, _ configmap.Watcher) *controller.Impl {
		clients <- injection.KubeClient(ctx)
		return controller.NewImpl(&recorder{}, logging.FromContext(ctx), "warnings")
	}
	exited := make(chan error, 1)
	go func() { exited <- Run(ctx, "warnings", ctor) }()
	var client kubernetes.Interface
	select {
	case client = <-clients:
	case err := <-exited:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no controller constructed within a minute")
	}

	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	for i := range 3 {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("web-", i), Namespace: appNS},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{
						{Name: "app", Image: "app", Ports: ports},
						{Name: "sidecar", Image: "sidecar", Ports: ports},
					}},
				},
			},
		}
		if _, err := client.AppsV1().Deployments(appNS).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	select {
	case <-exited:
	case <-time.After(45 * time.Second):
		t.Fatal("Run did not return within 45s of cancellation")
	}
	var warnings []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"kube-apiserver warning"`) {
			warnings = append(warnings, line)
		}
	}
	// One text for the port, one for its name.
	if len(warnings) != 2 || !strings.Contains(strings.Join(warnings, "\n"), "duplicate port") {
		t.Errorf("%d warning lines for three Deployments, want 2 (each text once):\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
}
