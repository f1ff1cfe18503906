package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/certificates"
)

// ProbeReady asks a webhook server on 127.0.0.1 whether it is ready, as the
// kube-apiserver would reach it: over TLS, trusting only the CA bundle of
// the process's certificates Secret. Test kits poll it while a process
// starts.
//
// It reads the CA bundle of the certificates Secret namespace/secretName
// and asks https://127.0.0.1:port/readyz once, with a 2-second timeout.
// It returns "" when the webhook answered 200, else why not (the Secret
// not written yet, the request's error, the status), for the caller's
// next attempt or its final error.
func ProbeReady(ctx context.Context, kube kubernetes.Interface, namespace, secretName string, port int) string {
	keys := certificates.DefaultDataKeys()
	secret, err := kube.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil || len(secret.Data[keys.CACert]) == 0 {
		return "certificates Secret not written yet"
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secret.Data[keys.CACert])
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 2 * time.Second, Transport: tr}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, ReadyzPath))
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "readyz: " + resp.Status
	}
	return ""
}
