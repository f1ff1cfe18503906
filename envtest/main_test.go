package envtest_test

import (
	"os"
	"testing"

	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/test/testenv"
)

// The kube-apiserver presents a client certificate to webhooks, as in a
// cluster whose webhooks authenticate their caller (webhooks that ask for
// none are unaffected), and kube-controller-manager runs too: the package
// tests both.
var controlPlane = envtest.Shared{Options: envtest.Options{WebhookClientAuth: true, ControllerManager: true}}

func TestMain(m *testing.M) {
	// In bindkit's repository, the binaries `make tools` built, unless
	// BINDKIT_BIN_DIR says otherwise; the tests themselves use envtest's
	// defaults as a Binding author's do.
	if os.Getenv(envtest.BinDirEnv) == "" {
		if dir, err := testenv.RepoBinDir(); err == nil {
			os.Setenv(envtest.BinDirEnv, dir)
		}
	}
	envtest.Main(m, &controlPlane, &workloadPlane)
}
