package hostile_test

import (
	"testing"

	"github.com/bindkit/bindkit/test/testenv"
)

// The kube-apiserver presents a client certificate to webhooks, which only
// the client-certificate test asks for.
var controlPlane = testenv.Shared{Options: testenv.Options{
	CRDPaths:          []string{"../../config/300-githubbinding.yaml"},
	WebhookClientAuth: true,
}}

func TestMain(m *testing.M) { controlPlane.Main(m) }
