package injection_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/injection"
)

// ByNamespace reads what Get and ListNamespace read, one namespace at a
// time, and never sees another namespace's object of the same name.
func TestTypedListerByNamespace(t *testing.T) {
	labelled := widget("shop", "a", int64(1))
	labelled.SetLabels(map[string]string{"tier": "gold"})
	client := fakeWidgetClient(labelled, widget("shop", "b", int64(2)), widget("other", "a", int64(3)))
	inf := injection.NewTypedInformer[Widget](client, widgetsGVR, injection.TypedInformerOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { inf.Informer().RunWithContext(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer never synced")
	}

	tests := []struct {
		namespace string
		name      string
		wantSize  int64 // 0: not found
		selector  labels.Selector
		wantList  map[string]int64
	}{
		{"shop", "a", 1, labels.Everything(), map[string]int64{"shop/a": 1, "shop/b": 2}},
		{"other", "a", 3, labels.Everything(), map[string]int64{"other/a": 3}},
		{"shop", "a", 1, labels.SelectorFromSet(labels.Set{"tier": "gold"}), map[string]int64{"shop/a": 1}},
		{"empty", "a", 0, labels.Everything(), map[string]int64{}},
	}
	for _, tt := range tests {
		lister := inf.Lister().ByNamespace(tt.namespace)
		got, err := lister.Get(tt.name)
		switch {
		case tt.wantSize == 0 && !apierrors.IsNotFound(err):
			t.Errorf("ByNamespace(%s).Get(%s) = %v, %v; want NotFound", tt.namespace, tt.name, got, err)
		case tt.wantSize != 0 && err != nil:
			t.Errorf("ByNamespace(%s).Get(%s): %v", tt.namespace, tt.name, err)
		case tt.wantSize != 0 && got.Spec.Size != tt.wantSize:
			t.Errorf("ByNamespace(%s).Get(%s) size = %d, want %d", tt.namespace, tt.name, got.Spec.Size, tt.wantSize)
		}
		list, err := lister.List(tt.selector)
		if err != nil {
			t.Fatalf("ByNamespace(%s).List(%s): %v", tt.namespace, tt.selector, err)
		}
		if diff := cmp.Diff(tt.wantList, sizes(list)); diff != "" {
			t.Errorf("ByNamespace(%s).List(%s) (-want +got):\n%s", tt.namespace, tt.selector, diff)
		}
	}
}
