package tracker_test

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindkit/bindkit/tracker"
)

func ExampleNew() {
	// In a controller the callback enqueues the observer's key.
	t := tracker.New(func(o tracker.Observer) { fmt.Println("enqueue", o) }, 30*time.Minute)

	binding := tracker.Observer{
		GroupKind:      schema.GroupKind{Group: "bindkit.dev", Kind: "EnvBinding"},
		NamespacedName: types.NamespacedName{Namespace: "default", Name: "gh"},
	}
	// Reconciling the Binding (re)tracks its subjects, renewing the lease.
	if err := t.TrackReference(tracker.Reference{
		APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}, binding); err != nil {
		fmt.Println(err)
	}

	// Informers deliver typed objects with an empty TypeMeta, so the
	// Deployment informer's handler passes the kind it watches.
	deploymentGK := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "web-1", Labels: map[string]string{"app": "web"},
	}}
	if err := t.OnChangedKind(deploymentGK, web); err != nil {
		fmt.Println(err)
	}

	// Without the kind the tracker refuses instead of matching nothing.
	fmt.Println(t.OnChanged(web))

	// A deleted Binding stops being notified.
	t.OnDeletedObserver(binding)
	observers, _ := t.GetObserversKind(deploymentGK, web)
	fmt.Println(len(observers), "observers")
	// Output:
	// enqueue EnvBinding.bindkit.dev default/gh
	// tracker: *v1.Deployment default/web-1: object carries no kind; pass its kind explicitly
	// 0 observers
}
