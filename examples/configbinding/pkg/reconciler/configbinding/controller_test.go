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

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

const finalizer = "bindings.bindkit.dev/configbindings"

func newDeployment(envFrom ...corev1.EnvFromSource) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
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

// TestContract checks Do and Undo, in the context WithContext gives them,
// on a workload of every shape.
func TestContract(t *testing.T) {
	bindingtest.CheckContract(t, newConfigBinding(), bindingtest.ContractOptions{WithContext: WithContext})
}

// TestReconcile reconciles one ConfigBinding over the injection fakes, the
// controller New wires: its ConfigMap and its subject.
func TestReconcile(t *testing.T) {
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
	deleted := newConfigBinding()
	deleted.Finalizers = []string{finalizer}
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
	bound := newDeployment(fromOwnConfigMap)
	bound.Annotations = map[string]string{duck.BoundAnnotation: "configbindings.bindings.bindkit.dev/cfg:1"}

	tests := []struct {
		name          string
		objects       []runtime.Object
		wantEnvFrom   []corev1.EnvFromSource
		wantData      map[string]string // of the Binding's ConfigMap; nil for none
		wantReady     string            // status/reason; empty when the Binding is deleted
		wantFinalizer bool
		wantErr       bool
	}{{
		name:          "binds the Deployment to a ConfigMap it creates",
		objects:       []runtime.Object{newConfigBinding(), newDeployment()},
		wantEnvFrom:   []corev1.EnvFromSource{fromOwnConfigMap},
		wantData:      map[string]string{"LOG_LEVEL": "debug"},
		wantReady:     "True/" + duck.ReasonBindingAvailable,
		wantFinalizer: true,
	}, {
		name:          "puts its ConfigMap's data right",
		objects:       []runtime.Object{newConfigBinding(), newDeployment(), ownedConfigMap(map[string]string{"LOG_LEVEL": "edited"})},
		wantEnvFrom:   []corev1.EnvFromSource{fromOwnConfigMap},
		wantData:      map[string]string{"LOG_LEVEL": "debug"},
		wantReady:     "True/" + duck.ReasonBindingAvailable,
		wantFinalizer: true,
	}, {
		name:          "binds nothing while someone else's ConfigMap has the name",
		objects:       []runtime.Object{newConfigBinding(), newDeployment(), foreignConfigMap()},
		wantData:      map[string]string{"MINE": "yes"},
		wantReady:     "False/" + psbinding.ReasonSubResourcesFailed,
		wantFinalizer: true,
		wantErr:       true,
	}, {
		name:    "a deleted Binding unbinds, then deletes its ConfigMap",
		objects: []runtime.Object{deleted, bound, ownedConfigMap(map[string]string{"LOG_LEVEL": "debug"})},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objects []runtime.Object
			for _, o := range tc.objects {
				objects = append(objects, o.DeepCopyObject())
			}
			c := bindingtest.NewController(t, binding, bindingtest.ControllerOptions{}, objects...)
			if err := c.Reconcile(ns, "cfg"); (err != nil) != tc.wantErr {
				t.Errorf("Reconcile error = %v, want an error: %v", err, tc.wantErr)
			}
			d := bindingtest.Get[appsv1.Deployment](t, c, ns, "web")
			if diff := cmp.Diff(tc.wantEnvFrom, d.Spec.Template.Spec.Containers[0].EnvFrom); diff != "" {
				t.Errorf("Deployment envFrom (-want +got):\n%s", diff)
			}
			cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "configbinding-cfg-bindinguid", metav1.GetOptions{})
			switch {
			case tc.wantData == nil && !apierrors.IsNotFound(err):
				t.Errorf("ConfigMap: %+v, %v, want none", cm, err)
			case tc.wantData != nil && err != nil:
				t.Errorf("ConfigMap: %v", err)
			case tc.wantData != nil:
				if diff := cmp.Diff(tc.wantData, cm.Data); diff != "" {
					t.Errorf("ConfigMap data (-want +got):\n%s", diff)
				}
			}
			cb := bindingtest.Get[v1alpha1.ConfigBinding](t, c, ns, "cfg")
			if got := slices.Contains(cb.Finalizers, finalizer); got != tc.wantFinalizer {
				t.Errorf("finalizers = %v, want ours: %v", cb.Finalizers, tc.wantFinalizer)
			}
			if tc.wantReady != "" {
				ready := cb.Status.GetCondition(duck.ConditionReady)
				if ready == nil || string(ready.Status)+"/"+ready.Reason != tc.wantReady {
					t.Errorf("Ready = %+v, want %s", ready, tc.wantReady)
				}
			}
		})
	}
}

func TestNewControllerOwnsTheConfigMap(t *testing.T) {
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
	c := bindingtest.NewController(t, binding, bindingtest.ControllerOptions{}, newConfigBinding(), newDeployment())
	if _, ok := c.Reconciler.SubResourcesReconciler.(*ConfigMapReconciler); !ok || c.Reconciler.WithContext == nil {
		t.Fatalf("SubResourcesReconciler %T, WithContext set %v: want *ConfigMapReconciler and set", c.Reconciler.SubResourcesReconciler, c.Reconciler.WithContext != nil)
	}
	if err := c.Reconcile(ns, "cfg"); err != nil {
		t.Fatal(err)
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "configbinding-cfg-bindinguid", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(cm); owner == nil || owner.UID != "binding-uid" || owner.Kind != v1alpha1.Kind {
		t.Errorf("ConfigMap controller = %+v, want the ConfigBinding", owner)
	}
}

func TestNewWebhookAdmitsWithContext(t *testing.T) {
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{{
		Kind: binding.GVK, Resource: binding.GVR.Resource, Namespaced: true,
	}}}, newConfigBinding())
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")
	impl := binding.Webhook(ctx, nil)
	ac, ok := wiring.Admission(impl)
	if !ok {
		t.Fatalf("Reconciler is %T, want *psbinding.AdmissionReconciler", impl.Reconciler())
	}
	if _, ok := impl.Reconciler().(webhook.Admitter); !ok {
		t.Error("Reconciler is not a webhook.Admitter: sharedmain would not serve it")
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
	want := `[{"op":"add","path":"/metadata/annotations","value":{"bindings.bindkit.dev/bound":"configbindings.bindings.bindkit.dev/cfg@binding-uid:1"}},` +
		`{"op":"add","path":"/spec/template/spec/containers/0/envFrom","value":[{"configMapRef":{"name":"configbinding-cfg-bindinguid"}}]}]`
	got, _ := json.Marshal(ops)
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("admission patch (-want +got):\n%s", diff)
	}
}
