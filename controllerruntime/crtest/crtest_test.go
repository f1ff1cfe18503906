package crtest_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bindkit/bindkit/controllerruntime/crtest"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"
)

// startControlPlane starts controller-runtime's envtest, as a kubebuilder
// project's suite does, with the GithubBinding CRD, on the binaries
// BinaryAssetsDirectory finds; without them the test is skipped (failed
// under CI=true).
func startControlPlane(t *testing.T) *crenvtest.Environment {
	t.Helper()
	dir, err := crtest.BinaryAssetsDirectory()
	if errors.Is(err, envtest.ErrBinariesMissing) && !envtest.InCI() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	env := &crenvtest.Environment{
		CRDDirectoryPaths:     []string{"../../config/300-githubbinding.yaml"},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: dir,
	}
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	return env
}

// TestStartBindsExistingAndNewDeploymentsOnControllerRuntimesEnvtest: a
// Manager Start runs on controller-runtime's envtest binds a Deployment
// that was there before its GithubBinding (the reconciler) and one created
// after (the webhook, called by the kube-apiserver over TLS with the CA
// bindkit published); Stop returns what the Manager returned and deletes
// the webhook configuration, so creates no longer call a closed port.
func TestStartBindsExistingAndNewDeploymentsOnControllerRuntimesEnvtest(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	ctrl.SetLogger(zap.New(zap.WriteTo(lockedWriter{&mu, &logs})))
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("manager log:\n%s", logs.String())
			mu.Unlock()
		}
	})
	env := startControlPlane(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	kind, err := githubbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	ns := "crtest"
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), deployment("existing"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	mgr, err := crtest.Start(t.Context(), env.Config, crtest.Options{Kinds: []*wiring.Kind{kind}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			mgr.Stop()
		}
	})
	if err := mgr.Ready(); err != nil {
		t.Errorf("Ready after Start: %v", err)
	}

	b := &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gh"},
		Spec: v1alpha1.GithubBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Secret:  corev1.LocalObjectReference{Name: "token"},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	// Start returned once a GithubBinding could be written: the first
	// create succeeds.
	if _, err := dyn.Resource(kind.GVR).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	poll(t, "the existing Deployment bound by the reconciler", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "existing", metav1.GetOptions{})
		return err == nil && mounted(d), nil
	})
	// The webhook configuration selects the namespace once the leader
	// has seen the Binding: dry-run creates until one comes back bound.
	poll(t, "a new Deployment bound at admission", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment("new"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && mounted(d), nil
	})

	stopped = true
	if err := mgr.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), kind.WebhookConfigurationName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("webhook configuration %s after Stop: %v, want it deleted", kind.WebhookConfigurationName, err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), deployment("after"), metav1.CreateOptions{}); err != nil {
		t.Errorf("create a Deployment after Stop: %v", err)
	}
}

// TestStartRefusesNoKinds: Start without a kind is an error naming the
// option, before it touches the cluster.
func TestStartRefusesNoKinds(t *testing.T) {
	_, err := crtest.Start(t.Context(), nil, crtest.Options{})
	if err == nil || !strings.Contains(err.Error(), "Options.Kinds") {
		t.Errorf("Start with no kinds: %v, want an error naming Options.Kinds", err)
	}
}

// lockedWriter writes to w under mu: the Manager logs from many
// goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": "web", "deployment": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"deployment": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}},
			},
		},
	}
}

// mounted reports whether d's template carries GithubBinding's volume.
func mounted(d *appsv1.Deployment) bool {
	return slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == v1alpha1.VolumeName })
}

func poll(t *testing.T, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, cond); err != nil {
		t.Fatalf("%s: not within a minute: %v", what, err)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}
