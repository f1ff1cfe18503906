package injectiontest_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
)

// secretCounter stands for a controller built from the context.
type secretCounter struct{ secrets corelisters.SecretLister }

func newSecretCounter(ctx context.Context) *secretCounter {
	return &secretCounter{secrets: injection.KubeInformerFactory(ctx).Core().V1().Secrets().Lister()}
}

func ExampleNewContext() {
	// In a test, t is the *testing.T; testing.Benchmark gives one here.
	testing.Benchmark(func(b *testing.B) {
		ctx, fakes := injectiontest.NewContext(b, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "token"}})
		c := newSecretCounter(ctx)
		fakes.Start(b)

		secrets, _ := c.secrets.Secrets("shop").List(labels.Everything())
		fmt.Println(len(secrets), secrets[0].Name)
		b.SkipNow()
	})
	// Output:
	// 1 token
}
