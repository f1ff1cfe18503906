package configbinding

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
)

var configBindings = injectiontest.Resource{
	Kind:       v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind),
	Resource:   v1alpha1.Resource,
	Namespaced: true,
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

const finalizer = "bindings.bindkit.dev/configbindings"

func newDeployment(envFrom ...corev1.EnvFromSource) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1", EnvFrom: envFrom}}},
			},
		},
	}
}

var fromOwnConfigMap = corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "configbinding-cfg-bindinguid"}}}

// setup builds NewController over fakes seeded with objects, starts the
// informers and promotes the reconciler.
func setup(t *testing.T, objects ...runtime.Object) (*psbinding.BaseReconciler, *injectiontest.Fakes) {
	t.Helper()
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{configBindings}}, objects...)
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")
	impl := NewController(ctx, nil) // the constructors read no ConfigMap
	r, ok := impl.Reconciler().(*psbinding.BaseReconciler)
	if !ok {
		t.Fatalf("Reconciler is %T, want *psbinding.BaseReconciler", impl.Reconciler())
	}
	if _, ok := r.SubResourcesReconciler.(*ConfigMapReconciler); !ok || r.WithContext == nil {
		t.Fatalf("SubResourcesReconciler %T, WithContext set %v: want *ConfigMapReconciler and set", r.SubResourcesReconciler, r.WithContext != nil)
	}
	fakes.Start(t)
	r.Promote(func(string) {})
	return r, fakes
}

func deploymentEnvFrom(t *testing.T, fakes *injectiontest.Fakes) []corev1.EnvFromSource {
	t.Helper()
	u, err := fakes.Dynamic.Resource(deploymentsGVR).Namespace(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].EnvFrom
}

func TestNewControllerBindsAndOwnsConfigMap(t *testing.T) {
	r, fakes := setup(t, newConfigBinding(), newDeployment())
	if err := r.Reconcile(t.Context(), ns+"/cfg"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if diff := cmp.Diff([]corev1.EnvFromSource{fromOwnConfigMap}, deploymentEnvFrom(t, fakes)); diff != "" {
		t.Errorf("Deployment envFrom (-want +got):\n%s", diff)
	}
	cm, err := fakes.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "configbinding-cfg-bindinguid", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"LOG_LEVEL": "debug"}, cm.Data); diff != "" {
		t.Errorf("ConfigMap data (-want +got):\n%s", diff)
	}
	if owner := metav1.GetControllerOf(cm); owner == nil || owner.UID != "binding-uid" || owner.Kind != v1alpha1.Kind {
		t.Errorf("ConfigMap controller = %+v, want the ConfigBinding", owner)
	}
}

func TestNewControllerDeletionUnbindsAndDeletesConfigMap(t *testing.T) {
	b := newConfigBinding()
	b.Finalizers = []string{finalizer}
	b.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
	bound := newDeployment(fromOwnConfigMap)
	bound.Annotations = map[string]string{duck.BoundAnnotation: "configbindings.bindings.bindkit.dev/cfg:1"}
	r, fakes := setup(t, b, bound, ownedConfigMap(b.Spec.Data))

	if err := r.Reconcile(t.Context(), ns+"/cfg"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got := deploymentEnvFrom(t, fakes); len(got) != 0 {
		t.Errorf("Deployment envFrom after deletion = %v, want none", got)
	}
	if _, err := fakes.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "configbinding-cfg-bindinguid", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap after deletion: err = %v, want NotFound", err)
	}
	u, err := fakes.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Get(t.Context(), "cfg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(u.GetFinalizers(), finalizer) {
		t.Errorf("finalizers = %v, want ours removed", u.GetFinalizers())
	}
}

func TestNewWebhookAdmitsWithContext(t *testing.T) {
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{configBindings}}, newConfigBinding())
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")
	impl := NewWebhook(ctx, nil)
	ac, ok := impl.Reconciler().(*psbinding.AdmissionController)
	if !ok {
		t.Fatalf("Reconciler is %T, want *psbinding.AdmissionController", impl.Reconciler())
	}
	if _, ok := impl.Reconciler().(webhook.AdmissionController); !ok {
		t.Error("Reconciler is not a webhook.AdmissionController: sharedmain would not serve it")
	}
	if diff := cmp.Diff([]string{WebhookConfigurationName, WebhookPath}, []string{impl.Name(), ac.Path()}); diff != "" {
		t.Errorf("name and path (-want +got):\n%s", diff)
	}
	fakes.Start(t)
	// A follower's reconcile builds the index and writes nothing.
	if err := ac.Reconcile(ctx, ac.Key()); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	raw, err := json.Marshal(newDeployment())
	if err != nil {
		t.Fatal(err)
	}
	resp := ac.Admit(ctx, &admissionv1.AdmissionRequest{
		UID:       "1",
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: ns, Name: "web", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: raw},
	})
	if resp == nil || !resp.Allowed {
		t.Fatalf("Admit = %+v, want allowed", resp)
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("decode patch %s: %v", resp.Patch, err)
	}
	want := `[{"op":"add","path":"/metadata/annotations","value":{"bindings.bindkit.dev/bound":"configbindings.bindings.bindkit.dev/cfg:1"}},` +
		`{"op":"add","path":"/spec/template/spec/containers/0/envFrom","value":[{"configMapRef":{"name":"configbinding-cfg-bindinguid"}}]}]`
	got, _ := json.Marshal(ops)
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("admission patch (-want +got):\n%s", diff)
	}
}
