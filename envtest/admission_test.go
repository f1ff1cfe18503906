package envtest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/envtest"
)

// TestKubeAPIServerPresentsWebhookClientCertificate proves
// Options.WebhookClientAuth: a webhook that requires a client certificate
// signed by Environment.WebhookClientCAFile's CA is called by the real
// kube-apiserver with one, and refuses a caller without.
func TestKubeAPIServerPresentsWebhookClientCertificate(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if len(env.WebhookClientCAPEM) == 0 || env.WebhookClientCAFile == "" {
		t.Fatal("no webhook client CA in the environment")
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM(env.WebhookClientCAPEM) {
		t.Fatal("client CA does not parse")
	}
	var callers atomic.Value // the CommonName of the last caller
	server, caPEM := startTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		callers.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(review)
	}), func(c *tls.Config) {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = clientCAs
	})

	// A caller without the certificate is refused at the handshake.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if resp, err := plain.Get(server.URL); err == nil {
		resp.Body.Close()
		t.Fatalf("a caller without a certificate got %s", resp.Status)
	} else if !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a caller without a certificate: %v, want a handshake refusal", err)
	}

	ns := env.CreateNamespace(t, "clientauth-")
	url := server.URL + "/validate"
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "testenv-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validate.envtest.bindkit.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), config.Name, metav1.DeleteOptions{})
	})
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, "web"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, err
		}
		return callers.Load() != nil, nil
	})
	if err != nil {
		t.Fatalf("the webhook was never called: %v", err)
	}
	if got := callers.Load(); got != envtest.WebhookClientCommonName {
		t.Errorf("the webhook's caller presented %q, want %q", got, envtest.WebhookClientCommonName)
	}
}
