package certificates_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/certificates"
)

func ExampleGenerateServingCert() {
	now := time.Now()
	ca, err := certificates.GenerateCA("webhook CA", now, certificates.DefaultCAValidity)
	if err != nil {
		panic(err)
	}
	serving, err := certificates.GenerateServingCert(ca,
		certificates.ServiceDNSNames("bindkit-webhook", "bindkit-system"),
		[]net.IP{net.IPv4(127, 0, 0, 1)},
		now, certificates.DefaultServingValidity)
	if err != nil {
		panic(err)
	}
	fmt.Println(serving.Cert.DNSNames)
	fmt.Println(serving.Cert.IPAddresses, serving.Key.Curve.Params().Name, serving.Cert.SignatureAlgorithm)
	fmt.Println(serving.Cert.CheckSignatureFrom(ca.Cert) == nil)
	// Output:
	// [bindkit-webhook bindkit-webhook.bindkit-system bindkit-webhook.bindkit-system.svc bindkit-webhook.bindkit-system.svc.cluster.local]
	// [127.0.0.1] P-256 ECDSA-SHA256
	// true
}

func ExampleReconciler() {
	client := fake.NewClientset()
	r, err := certificates.NewReconciler(client, certificates.Options{
		SecretName:  "webhook-certs",
		Namespace:   "bindkit-system",
		ServiceName: "bindkit-webhook",
	}, certificates.ReconcilerOptions{EnqueueAfter: func(key string, d time.Duration) {
		// A controller would call its queue's AddAfter here.
		fmt.Printf("run %s again in %v\n", key, d.Round(time.Hour))
	}})
	if err != nil {
		panic(err)
	}
	if err := r.Reconcile(context.Background(), r.Key()); err != nil {
		panic(err)
	}
	secret, err := client.CoreV1().Secrets("bindkit-system").Get(context.Background(), "webhook-certs", metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	var keys []string
	for k := range secret.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Println(keys)
	// Output:
	// run bindkit-system/webhook-certs again in 144h0m0s
	// [ca-cert.pem ca-key.pem server-cert.pem server-key.pem]
}
