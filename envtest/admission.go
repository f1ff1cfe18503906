package envtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WebhookClientCommonName is the subject of the client certificate the
// kube-apiserver presents to webhooks under Options.WebhookClientAuth.
const WebhookClientCommonName = "kube-apiserver-webhook-client"

// writeWebhookClientAuth makes a CA and a client certificate it signs, and
// an AdmissionConfiguration whose webhook plugins present the certificate
// to every webhook (the kubeconfig user "*"). It records the CA in env and
// adds the kube-apiserver flag that reads the configuration to f.
func writeWebhookClientAuth(dir string, f *apiServerFiles, env *Environment) error {
	caPEM, certPEM, keyPEM, err := newClientCert(WebhookClientCommonName)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return fmt.Errorf("write webhook client kubeconfig: %w", err)
	}
	admission := filepath.Join(dir, "admission-configuration.yaml")
	config := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]q
`, kubeconfig)
	caFile := filepath.Join(dir, "webhook-client-ca.crt")
	for path, data := range map[string][]byte{admission: []byte(config), caFile: caPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	f.extraArgs = append(f.extraArgs, "--admission-control-config-file="+admission)
	env.WebhookClientCAPEM, env.WebhookClientCAFile = caPEM, caFile
	return nil
}

// newClientCert makes a CA, valid for a day, and a client certificate it
// signs for commonName, all in PEM form.
func newClientCert(commonName string) (caPEM, certPEM, keyPEM []byte, err error) {
	now := time.Now()
	caKey, ca, caDER, err := newCA("bindkit-envtest-webhook-client-ca", "client CA", now)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate client key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign client certificate: %w", err)
	}
	if keyPEM, err = ecKeyPEM(key); err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}
