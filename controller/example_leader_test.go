package controller_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/controller"
)

// configWriter writes only while leader; on promotion it enqueues the one
// object it owns, whose reconcile skipped its write on a follower.
type configWriter struct {
	controller.LeaderAwareFuncs
	written chan string
}

func (w *configWriter) Reconcile(_ context.Context, key string) error {
	if !w.IsLeader() {
		return nil // keep read-only state warm; write nothing
	}
	w.written <- key
	return nil
}

func ExampleRunLeaderElected() {
	w := &configWriter{written: make(chan string, 1)}
	w.PromoteFunc = func(enqueue func(string)) { enqueue("bindkit-system/config") }
	w.DemoteFunc = func() { fmt.Println("demoted") }
	impl := controller.NewImpl(w, nil, "config")

	// A real process passes its clientset and its pod name as Identity.
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { impl.Run(ctx, 1) })
	wg.Go(func() {
		err := controller.RunLeaderElected(ctx, kube, controller.LeaderElectionConfig{
			Namespace: "bindkit-system", Name: "config-controller", Identity: "pod-0",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
		}, impl)
		if err != nil {
			fmt.Println("election:", err)
		}
	})

	fmt.Println("leader wrote", <-w.written)
	cancel()
	wg.Wait()
	// Output:
	// leader wrote bindkit-system/config
	// demoted
}
