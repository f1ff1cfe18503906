package hostile_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/webhook"
)

// TestClientCertificateRequiredWithRealAPIServer runs the example
// controller with --webhook-client-ca, the CA of the client certificate
// the real kube-apiserver presents to webhooks through its
// AdmissionConfiguration: the kube-apiserver's admissions succeed (a new
// Deployment comes back bound), while a caller without the certificate, or
// with one from another CA, is refused during the TLS handshake. The
// probes answer over HTTP on --probe-port.
func TestClientCertificateRequiredWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	probe := func(c *controller) error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", c.probePort, webhook.ReadyzPath))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}
	c := startController(t, env, probe, "--webhook-client-ca="+env.WebhookClientCAFile)
	createBinding(t, env, "authed-binding", "authed")

	// The kube-apiserver gets in: a Deployment created after the Binding
	// comes back bound by the webhook.
	kube := kubernetes.NewForConfigOrDie(env.Config)
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "authed"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "authed"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "authed"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
	bound := func(d *appsv1.Deployment) bool {
		return slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "github-token" })
	}
	var last error
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := kube.AppsV1().Deployments(testNamespace).Create(ctx, deployment, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false, nil
		}
		return bound(got), nil
	}); err != nil {
		t.Fatalf("the kube-apiserver's admissions never bound the Deployment: %v (last error: %v)\n%s", err, last, c.logTail())
	}
	created, err := kube.AppsV1().Deployments(testNamespace).Create(t.Context(), deployment, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	if !bound(created) {
		t.Error("Deployment created through the kube-apiserver came back unbound")
	}

	// Anyone else is refused at the handshake.
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":                nil,
		"a certificate from another CA": {otherClientCert(t)},
	} {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.port), &tls.Config{RootCAs: c.roots, Certificates: certs})
		if err == nil {
			// TLS 1.3 reports the server's refusal on the first read.
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Write([]byte("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"))
			if err == nil {
				_, err = conn.Read(make([]byte, 1))
			}
			conn.Close()
		}
		if err == nil || !(strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate") || strings.Contains(err.Error(), "unknown certificate authority")) {
			t.Errorf("%s: %v, want the TLS handshake refused", name, err)
		}
	}
	c.checkLog()
	auditTestNamespace(t, env)
}

// otherClientCert is a client certificate from a CA the webhook does not
// trust.
func otherClientCert(t *testing.T) tls.Certificate {
	t.Helper()
	ca, err := testenv.NewServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
