package githubbinding

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/webhook"
	"github.com/bindkit/bindkit/wiring"
)

const (
	ns              = "shop"
	systemNamespace = "bindkit-system"
)

func newGithubBinding(subject tracker.Reference) *v1alpha1.GithubBinding {
	return &v1alpha1.GithubBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gh", Generation: 1},
		Spec:       v1alpha1.GithubBindingSpec{Subject: subject, Secret: corev1.LocalObjectReference{Name: "gh-token"}},
	}
}

func byName(name string) tracker.Reference {
	return tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

func newDeployment(namespace, name, app string) *appsv1.Deployment {
	labels := map[string]string{"app": app}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
			},
		},
	}
}

// mounted reports whether d's pod template mounts the Binding's Secret.
func mounted(d *appsv1.Deployment) bool {
	spec := d.Spec.Template.Spec
	return slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == v1alpha1.VolumeName }) &&
		slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == v1alpha1.MountPath })
}

func readyReason(b *v1alpha1.GithubBinding) string {
	c := b.Status.GetCondition(duck.ConditionReady)
	if c == nil {
		return "no Ready condition"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestReconcile reconciles one GithubBinding over the injection fakes and
// checks which Deployments it bound and what its Ready condition says.
func TestReconcile(t *testing.T) {
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name        string
		binding     *v1alpha1.GithubBinding
		deployments []*appsv1.Deployment
		wantBound   []string // namespace/name of the Deployments bound afterwards
		wantReady   string   // status/reason
		wantErr     bool
	}{{
		name:        "a Deployment by name",
		binding:     newGithubBinding(byName("web")),
		deployments: []*appsv1.Deployment{newDeployment(ns, "web", "web"), newDeployment(ns, "db", "db")},
		wantBound:   []string{"shop/web"},
		wantReady:   "True/" + duck.ReasonBindingAvailable,
	}, {
		name:    "every Deployment a selector matches",
		binding: newGithubBinding(tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: sel}),
		deployments: []*appsv1.Deployment{newDeployment(ns, "web-1", "web"), newDeployment(ns, "web-2", "web"),
			newDeployment(ns, "db", "db"), newDeployment("other", "web-3", "web")},
		wantBound: []string{"shop/web-1", "shop/web-2"},
		wantReady: "True/" + duck.ReasonBindingAvailable,
	}, {
		name:        "a subject in another namespace is refused",
		binding:     newGithubBinding(tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "web"}),
		deployments: []*appsv1.Deployment{newDeployment("other", "web", "web")},
		wantReady:   "False/" + psbinding.ReasonSubjectOutsideNamespace,
		wantErr:     true,
	}, {
		name:        "a subject without a name or selector is refused",
		binding:     newGithubBinding(tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment"}),
		deployments: []*appsv1.Deployment{newDeployment(ns, "web", "web")},
		wantReady:   "False/" + psbinding.ReasonSubjectInvalid,
		wantErr:     true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objects := []runtime.Object{tc.binding}
			for _, d := range tc.deployments {
				objects = append(objects, d)
			}
			c := bindingtest.NewController(t, binding, bindingtest.ControllerOptions{}, objects...)
			err := c.Reconcile(ns, "gh")
			if (err != nil) != tc.wantErr {
				t.Errorf("Reconcile error = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr && !controller.IsPermanentError(err) {
				t.Errorf("Reconcile error %v is not permanent: a Binding that cannot work would retry forever", err)
			}
			var bound []string
			for _, d := range tc.deployments {
				if mounted(bindingtest.Get[appsv1.Deployment](t, c, d.Namespace, d.Name)) {
					bound = append(bound, d.Namespace+"/"+d.Name)
				}
			}
			if diff := cmp.Diff(tc.wantBound, bound); diff != "" {
				t.Errorf("bound Deployments (-want +got):\n%s", diff)
			}
			if got := readyReason(bindingtest.Get[v1alpha1.GithubBinding](t, c, ns, "gh")); got != tc.wantReady {
				t.Errorf("Ready = %s, want %s", got, tc.wantReady)
			}
		})
	}
}

// TestReconcileDeletedBindingUnbinds binds a Deployment, marks the Binding
// deleted, and checks the next reconcile unbinds the Deployment and lets go
// of the Binding.
func TestReconcileDeletedBindingUnbinds(t *testing.T) {
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
	c := bindingtest.NewController(t, binding, bindingtest.ControllerOptions{}, newGithubBinding(byName("web")), newDeployment(ns, "web", "web"))
	if err := c.Reconcile(ns, "gh"); err != nil {
		t.Fatal(err)
	}
	if !mounted(bindingtest.Get[appsv1.Deployment](t, c, ns, "web")) {
		t.Fatal("Deployment web not bound")
	}

	// The fakes know no finalizers: mark the Binding deleted as the API
	// server does while one is left.
	gh := bindingtest.Get[v1alpha1.GithubBinding](t, c, ns, "gh")
	gh.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(binding.GVR).Namespace(ns).Update(c.Context, &unstructured.Unstructured{Object: content}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := injection.TypedInformerFor[v1alpha1.GithubBinding](c.Context, binding.GVR).Lister()
	err = wait.PollUntilContextTimeout(c.Context, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := lister.Get(ns, "gh")
		return err == nil && got.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Fatal("the informer never saw the deletion")
	}

	if err := c.Reconcile(ns, "gh"); err != nil {
		t.Fatal(err)
	}
	d := bindingtest.Get[appsv1.Deployment](t, c, ns, "web")
	if mounted(d) || len(d.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("Deployment web still bound after its Binding's deletion: %+v", d.Spec.Template.Spec)
	}
	if bound := duck.BoundOf(d.Annotations); len(bound) != 0 {
		t.Errorf("Deployment web still records %v", bound)
	}
	if f := bindingtest.Get[v1alpha1.GithubBinding](t, c, ns, "gh").Finalizers; len(f) != 0 {
		t.Errorf("finalizers left on the deleted Binding: %v", f)
	}
}

func TestNewWebhookAdmitsAndProgramsConfiguration(t *testing.T) {
	binding, err := New()
	if err != nil {
		t.Fatal(err)
	}
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
	gh := newGithubBinding(byName("web"))
	gh.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind}
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{{
		Kind: binding.GVK, Resource: binding.GVR.Resource, Namespaced: true,
	}}}, gh, secret, config)
	ctx = injection.WithSystemNamespace(ctx, systemNamespace)

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

	d := newDeployment(ns, "web", "web")
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	raw, err := json.Marshal(d)
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
