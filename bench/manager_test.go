package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

// The controller-runtime module's kubebuilder example (a module of its
// own), and the names its config/bindkit gives the GithubBinding kind's
// webhook (wiring's defaults).
const (
	managerModule               = "../controllerruntime/examples/githubbinding"
	managerPackage              = managerModule + "/cmd"
	managerWebhookConfiguration = "githubbindings.bindings.bindkit.dev"
	managerWebhookName          = "githubbindings.bindings.bindkit.dev"
	managerWebhookPath          = "/githubbindings"
	managerCertificatesSecret   = "webhook-server-cert"
)

// managerBench runs the kubebuilder example's manager binary as its
// deployment would, with kubebuilder's default flags: the certificate
// cert-manager would write (a Secret in the system namespace, its files
// in --webhook-cert-path) and its webhook configuration pointed at
// 127.0.0.1.
type managerBench struct {
	env     *testenv.Environment
	binary  string
	port    int
	certDir string
}

func newManagerBench(b *testing.B, env *testenv.Environment) *managerBench {
	b.Helper()
	mb := &managerBench{env: env, binary: buildBinary(b, managerPackage), port: freePort(b), certDir: b.TempDir()}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	cert, err := testenv.NewServingCert("127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM} {
		if err := os.WriteFile(filepath.Join(mb.certDir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: demo.SystemNamespace, Name: managerCertificatesSecret},
		Data: map[string][]byte{"ca.crt": cert.CAPEM, "tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM}}
	if _, err := kube.CoreV1().Secrets(demo.SystemNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", mb.port, managerWebhookPath)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: managerWebhookConfiguration},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: managerWebhookName, AdmissionReviewVersions: []string{"v1"},
			SideEffects: new(admissionregistrationv1.SideEffectClassNone), FailurePolicy: new(admissionregistrationv1.Fail),
			TimeoutSeconds: new(int32(10)), ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return mb
}

// start starts the manager binary with kubebuilder's default flags (no
// leader election, as the sharedmain binary runs with --disable-ha here)
// and waits until its /readyz, bindkit's check included, answers 200.
func (mb *managerBench) start(b *testing.B, extraEnv ...string) *process {
	b.Helper()
	probePort := freePort(b)
	p := startProcess(b, mb.env.Dir, mb.binary, []string{
		"--kubeconfig=" + mb.env.KubeconfigPath,
		"--webhook-port=" + strconv.Itoa(mb.port),
		"--webhook-cert-path=" + mb.certDir,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort),
	}, append([]string{"SYSTEM_NAMESPACE=" + demo.SystemNamespace}, extraEnv...), false)
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	poll(b, 2*time.Minute, "the manager ready", func() (bool, error) {
		if err := p.exited(); err != nil {
			return false, fmt.Errorf("%w\n%s", err, p.logTail())
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}
