package psbinding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// sinkBinding sets SINK_URL on every container of its subject.
type sinkBinding struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Subject tracker.Reference
	URL     string
	Status  duck.Status
}

func (b *sinkBinding) GetSubject() tracker.Reference         { return b.Subject }
func (b *sinkBinding) GetBindingStatus() duck.BindableStatus { return &b.Status }
func (b *sinkBinding) DeepCopyObject() runtime.Object {
	out := *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b.Subject.DeepCopyInto(&out.Subject)
	b.Status.DeepCopyInto(&out.Status)
	return &out
}

func (b *sinkBinding) Do(ctx context.Context, wp *duck.WithPod) {
	b.Undo(ctx, wp) // idempotent: never two SINK_URLs
	for i := range wp.Spec.Template.Spec.Containers {
		c := &wp.Spec.Template.Spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: "SINK_URL", Value: b.URL})
	}
}

func (b *sinkBinding) Undo(_ context.Context, wp *duck.WithPod) {
	for i := range wp.Spec.Template.Spec.Containers {
		c := &wp.Spec.Template.Spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SINK_URL" })
	}
}

// The admission path on its own: after one reconcile has indexed the
// Bindings, a Deployment created with a matching label comes back with the
// Binding's patch.
func ExampleNewAdmissionReconciler() {
	binding := &sinkBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "events"},
		Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "checkout"}}},
		URL: "http://broker.shop.svc",
	}

	// What a cluster would have: the installed webhook configuration and
	// the certificates Secret.
	kube := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "sinks.example.com"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "sinks.example.com",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr("https://127.0.0.1:8443")}}},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "sinks-system", Name: "webhook-certs"},
			Data: map[string][]byte{"ca-cert.pem": []byte("CA")}},
	)
	secrets := informers.NewSharedInformerFactory(kube, 0).Core().V1().Secrets()
	stop := make(chan struct{})
	defer close(stop)
	go secrets.Informer().Run(stop)
	cache.WaitForCacheSync(stop, secrets.Informer().HasSynced)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)

	ac, err := psbinding.NewAdmissionReconciler(psbinding.AdmissionConfig{
		ConfigurationName: "sinks.example.com",
		Path:              "/sinks",
		ListAll:           func() ([]psbinding.Bindable, error) { return []psbinding.Bindable{binding}, nil },
		KubeClient:        kube,
		Mapper:            mapper,
		SecretLister:      secrets.Lister(),
		SecretName:        "webhook-certs",
		SystemNamespace:   "sinks-system",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ac.Reconcile(context.Background(), ac.Key()); err != nil {
		fmt.Println(err)
		return
	}

	deployment := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", Labels: map[string]string{"team": "checkout"}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "cart", Image: "cart:v1"}},
		}}},
	}
	raw, _ := json.Marshal(deployment)
	resp := ac.Admit(context.Background(), &admissionv1.AdmissionRequest{
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Namespace: "shop", Name: "cart", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: raw},
	})
	fmt.Println("allowed:", resp.Allowed)
	fmt.Println("patch:", string(resp.Patch))
	// Output:
	// allowed: true
	// patch: [{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"SINK_URL","value":"http://broker.shop.svc"}]}]
}

func ptr[T any](v T) *T { return &v }
