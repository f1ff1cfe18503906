package envtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultControllers returns the kube-controller-manager controllers Start
// runs when Options.ControllerManager is set and Options.Controllers is
// empty: the garbage collector (owner references, foreground and orphan
// deletion) and the namespace controller (a deleted namespace is emptied and
// disappears). The names are those of kube-controller-manager --controllers.
func DefaultControllers() []string {
	return []string{"garbage-collector-controller", "namespace-controller"}
}

// startControllerManager runs kube-controller-manager against the
// environment's kube-apiserver as the administrator and waits for its
// /healthz. It serves HTTPS on port with the kube-apiserver's loopback
// certificate, so the health check verifies it like any other server. A
// process that fails is stopped.
func (e *Environment) startControllerManager(ctx context.Context, binDir string, f *apiServerFiles, port int, controllers []string) error {
	p, err := startProcess(controllerManagerBinary, filepath.Join(binDir, controllerManagerBinary), []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--authentication-kubeconfig=" + e.KubeconfigPath,
		"--authorization-kubeconfig=" + e.KubeconfigPath,
		"--controllers=" + strings.Join(controllers, ","),
		// One instance, stopped with the environment: nothing to elect.
		"--leader-elect=false",
		// Every controller acts with the admin credential of the kubeconfig;
		// per-controller ServiceAccounts would need the token controller.
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + f.certFile,
		"--tls-private-key-file=" + f.keyFile,
		// The defaults (20 and 30) make a namespace deletion, which lists
		// every resource type, take seconds when tests delete many at once.
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--v=0",
	}, e.Dir)
	if err != nil {
		return err
	}
	e.controllerManager = p
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.serving.CAPEM) {
		return fmt.Errorf("%s: no certificate in the loopback CA", controllerManagerBinary)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	return e.stopIfFailed(p, waitHealthy(ctx, p, client, fmt.Sprintf("https://127.0.0.1:%d/healthz", port)))
}
