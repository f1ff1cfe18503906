package envtest_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/envtest"
)

// seenRequest is what the test webhook records of each AdmissionReview.
type seenRequest struct {
	Kind      string
	Namespace string
	Name      string
	Operation admissionv1.Operation
	DryRun    bool
}

// TestKubeAPIServerCallsMutatingWebhook proves the harness end to end: the
// real kube-apiserver calls a TLS webhook on 127.0.0.1 through a URL client
// config and applies the JSON patch it answers with.
func TestKubeAPIServerCallsMutatingWebhook(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)

	var (
		mu   sync.Mutex
		seen []seenRequest
	)
	const patch = `[{"op":"add","path":"/metadata/annotations/envtest.bindkit.dev~1mutated","value":"true"}]`
	server, caPEM := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("bad review: %v", err), http.StatusBadRequest)
			return
		}
		req := review.Request
		mu.Lock()
		seen = append(seen, seenRequest{req.Kind.Kind, req.Namespace, req.Name, req.Operation, req.DryRun != nil && *req.DryRun})
		mu.Unlock()
		patchType := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true, Patch: []byte(patch), PatchType: &patchType}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(review)
	}))

	ns := env.CreateNamespace(t, "testenv-")
	webhookName := "mutate.envtest.bindkit.dev"
	url := server.URL + "/mutate"
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	timeout := int32(10)
	config := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    webhookName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			// Only this test's namespace, so parallel tests are not affected.
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"},
				},
			}},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingWebhookConfiguration: %v", err)
	}
	t.Cleanup(func() {
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), config.Name, metav1.DeleteOptions{})
	})

	// The kube-apiserver learns of a new configuration through an informer;
	// dry-run creates show when it is in force without storing anything.
	deployment := newDeployment(ns, "web")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return got.Annotations["envtest.bindkit.dev/mutated"] == "true", nil
	})
	if err != nil {
		t.Fatalf("webhook never took effect on dry-run creates: %v", err)
	}

	created, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	stored, err := kube.AppsV1().Deployments(ns).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Deployment: %v", err)
	}
	wantAnnotations := map[string]string{"owner": "testenv", "envtest.bindkit.dev/mutated": "true"}
	if diff := cmp.Diff(wantAnnotations, stored.Annotations); diff != "" {
		t.Errorf("stored Deployment annotations (-want +got):\n%s", diff)
	}

	mu.Lock()
	last := seen[len(seen)-1]
	mu.Unlock()
	want := seenRequest{Kind: "Deployment", Namespace: ns, Name: "web", Operation: admissionv1.Create, DryRun: false}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("last AdmissionReview the webhook saw (-want +got):\n%s", diff)
	}
}

// startTLSServer serves handler over TLS on 127.0.0.1 and returns the server
// and the CA bundle that trusts it.
func startTLSServer(t *testing.T, handler http.Handler, configure ...func(*tls.Config)) (*httptest.Server, []byte) {
	t.Helper()
	cert, err := envtest.NewServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := cert.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configure {
		c(tlsConfig)
	}
	server := httptest.NewUnstartedServer(handler)
	server.TLS = tlsConfig
	server.StartTLS()
	t.Cleanup(server.Close)
	return server, cert.CAPEM
}

func newDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"owner": "testenv"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
}
