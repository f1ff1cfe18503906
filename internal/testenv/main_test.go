package testenv_test

import (
	"testing"

	"github.com/bindkit/bindkit/internal/testenv"
)

// The kube-apiserver presents a client certificate to webhooks, as in a
// cluster whose webhooks authenticate their caller (webhooks that ask for
// none are unaffected), and kube-controller-manager runs too: the package
// tests both.
var controlPlane = testenv.Shared{Options: testenv.Options{WebhookClientAuth: true, ControllerManager: true}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
