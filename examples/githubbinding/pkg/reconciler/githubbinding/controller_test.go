package githubbinding

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
)

const (
	ns              = "shop"
	systemNamespace = "bindkit-system"
)

// githubBindings declares the CRD to the fakes, as config/300-githubbinding.yaml
// does to a cluster.
var githubBindings = injectiontest.Resource{
	Kind:       v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind),
	Resource:   v1alpha1.Resource,
	Namespaced: true,
}

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func newGithubBinding() *v1alpha1.GithubBinding {
	return &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gh", Generation: 1, ResourceVersion: "1"},
		Spec: v1alpha1.GithubBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Secret:  corev1.LocalObjectReference{Name: "gh-token"},
		},
	}
}

func newDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", ResourceVersion: "1"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
			},
		},
	}
}

func TestNewControllerReconcilesThroughFakes(t *testing.T) {
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{githubBindings}},
		newGithubBinding(), newDeployment())
	ctx = injection.WithSystemNamespace(ctx, systemNamespace)

	impl := NewController(ctx, nil) // the constructors read no ConfigMap
	r, ok := impl.Reconciler().(*psbinding.BaseReconciler)
	if !ok {
		t.Fatalf("Reconciler is %T, want *psbinding.BaseReconciler", impl.Reconciler())
	}
	if diff := cmp.Diff([]string{ControllerName, v1alpha1.GroupVersionResource().String()}, []string{impl.Name(), r.GVR.String()}); diff != "" {
		t.Errorf("name and GVR (-want +got):\n%s", diff)
	}
	fakes.Start(t)

	var promoted []string
	r.Promote(func(key string) { promoted = append(promoted, key) })
	if diff := cmp.Diff([]string{ns + "/gh"}, promoted); diff != "" {
		t.Errorf("keys enqueued on promotion (-want +got):\n%s", diff)
	}
	if err := r.Reconcile(ctx, ns+"/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	u, err := fakes.Dynamic.Resource(deploymentsGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
		t.Fatal(err)
	}
	want := newDeployment().Spec.Template.Spec
	want.Volumes = []corev1.Volume{{Name: v1alpha1.VolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "gh-token"}}}}
	want.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: v1alpha1.VolumeName, MountPath: v1alpha1.MountPath, ReadOnly: true}}
	if diff := cmp.Diff(want, got.Spec.Template.Spec); diff != "" {
		t.Errorf("Deployment pod spec after reconcile (-want +got):\n%s", diff)
	}

	ub, err := fakes.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Get(ctx, "gh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var binding v1alpha1.GithubBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ub.Object, &binding); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(binding.Finalizers, "bindings.bindkit.dev/githubbindings") {
		t.Errorf("finalizers = %v, want the reconciler's", binding.Finalizers)
	}
	if !binding.Status.IsReady() {
		t.Errorf("status not Ready: %+v", binding.Status)
	}
}

func TestNewWebhookAdmitsAndProgramsConfiguration(t *testing.T) {
	caBundle := []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: webhook.DefaultSecretName},
		Data:       map[string][]byte{certificates.DefaultDataKeys().CACert: caBundle},
	}
	path := "/"
	config := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         WebhookConfigurationName,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: systemNamespace, Name: "webhook", Path: &path}},
		}},
	}
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{githubBindings}},
		newGithubBinding(), secret, config)
	ctx = injection.WithSystemNamespace(ctx, systemNamespace)

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
	ac.Promote(func(string) {})
	if err := ac.Reconcile(ctx, ac.Key()); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	programmed, err := fakes.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wh := programmed.Webhooks[0]
	var resources []string
	for _, rule := range wh.Rules {
		resources = append(resources, strings.Join(rule.APIGroups, ",")+"/"+strings.Join(rule.Resources, ","))
	}
	if diff := cmp.Diff([]string{"apps/deployments"}, resources); diff != "" {
		t.Errorf("webhook rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(caBundle, wh.ClientConfig.CABundle); diff != "" {
		t.Errorf("caBundle (-want +got):\n%s", diff)
	}
	if got := *wh.ClientConfig.Service.Path; got != WebhookPath {
		t.Errorf("service path = %q, want %q", got, WebhookPath)
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
	var ops []jsonpatch.Operation
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("decode patch %s: %v", resp.Patch, err)
	}
	var paths []string
	for _, op := range ops {
		paths = append(paths, op.Operation+" "+op.Path)
	}
	slices.Sort(paths)
	want := []string{"add /metadata/annotations", "add /spec/template/spec/containers/0/volumeMounts", "add /spec/template/spec/volumes"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("admission patch (-want +got):\n%s\npatch: %s", diff, resp.Patch)
	}
}

func TestListAllListsEveryGithubBinding(t *testing.T) {
	other := newGithubBinding()
	other.Namespace, other.Name = "other", "gh2"
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{githubBindings}},
		newGithubBinding(), other)
	var added atomic.Int32
	list := ListAll(ctx, cache.ResourceEventHandlerFuncs{AddFunc: func(any) { added.Add(1) }})
	fakes.Start(t)
	bindings, err := list()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, b := range bindings {
		keys = append(keys, b.GetNamespace()+"/"+b.GetName())
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"other/gh2", ns + "/gh"}, keys); diff != "" {
		t.Errorf("ListAll (-want +got):\n%s", diff)
	}
	// Handlers hear of the cache's content after it has synced.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return added.Load() == 2, nil
	})
	if err != nil {
		t.Errorf("handler saw %d adds, want 2", added.Load())
	}
}

// Bindings from ListAll must satisfy what the admission index reads.
var _ duck.Bindable = (*v1alpha1.GithubBinding)(nil)
