package injection_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/injection"
)

// newWidgetController stands for a controller constructor: it reads what it
// needs from the context and requests informers, and starts nothing.
func newWidgetController(ctx context.Context) func() (int, error) {
	secrets := injection.KubeInformerFactory(ctx).Core().V1().Secrets().Lister()
	widgets := injection.TypedInformerFor[Widget](ctx, widgetsGVR).Lister()
	return func() (int, error) {
		s, err := secrets.List(labels.Everything())
		if err != nil {
			return 0, err
		}
		w, err := widgets.List(labels.Everything())
		return len(s) + len(w), err
	}
}

func ExampleNew() {
	// In main, cfg comes from the cluster or a kubeconfig. This one points
	// at a port where nothing listens, so the caches cannot sync and the
	// wait below ends with its context.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ctx, informers, err := injection.New(context.Background(), cfg, injection.Options{})
	if err != nil {
		panic(err)
	}
	defer informers.Shutdown()

	count := newWidgetController(ctx)

	informers.Start(ctx)
	fmt.Println("started:", informers.Started())

	syncCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := informers.WaitForCacheSync(syncCtx); err != nil {
		fmt.Println(err)
		return
	}
	n, _ := count()
	fmt.Println("objects:", n)
	// Output:
	// started: [*v1.Secret example.bindkit.dev/v1alpha1, Resource=widgets]
	// injection: wait for cache sync: not synced: *v1.Secret, example.bindkit.dev/v1alpha1, Resource=widgets: context deadline exceeded
}
