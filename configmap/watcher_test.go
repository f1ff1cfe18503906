package configmap_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/bindkit/bindkit/configmap"
)

const ns = "bindkit-system"

func newCM(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string]string{"v": value},
	}
}

// recorder writes each observer call as "name=value", "name=<nil>" for nil.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) observer(name string) configmap.Observer {
	return func(cm *corev1.ConfigMap) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if cm == nil {
			r.calls = append(r.calls, name+"=<nil>")
			return
		}
		r.calls = append(r.calls, name+"="+cm.Data["v"])
	}
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// waitFor polls until the calls recorded equal want, or fails t with a diff.
func (r *recorder) waitFor(t *testing.T, want []string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cmp.Equal(want, r.get()), nil
	})
	if err != nil {
		t.Fatalf("observer calls (-want +got):\n%s", cmp.Diff(want, r.get()))
	}
}

func TestStaticWatcher(t *testing.T) {
	tests := []struct {
		name  string
		cms   []*corev1.ConfigMap
		watch []string
		want  []string
	}{
		{name: "present", cms: []*corev1.ConfigMap{newCM("a", "1")}, watch: []string{"a"}, want: []string{"a=1"}},
		{name: "missing is nil", cms: []*corev1.ConfigMap{newCM("a", "1")}, watch: []string{"b"}, want: []string{"b=<nil>"}},
		{name: "none given", watch: []string{"a", "b"}, want: []string{"a=<nil>", "b=<nil>"}},
		{name: "several", cms: []*corev1.ConfigMap{newCM("a", "1"), newCM("b", "2")}, watch: []string{"b", "a"}, want: []string{"b=2", "a=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := configmap.NewStaticWatcher(tt.cms...)
			var r recorder
			for _, name := range tt.watch {
				// Called before Watch returns: no waiting needed.
				w.Watch(name, r.observer(name))
			}
			if diff := cmp.Diff(tt.want, r.get()); diff != "" {
				t.Errorf("observer calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaticWatcherRejectsDuplicates(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "two ConfigMaps named a") {
			t.Errorf("recover() = %v, want a panic naming the duplicate", r)
		}
	}()
	configmap.NewStaticWatcher(newCM("a", "1"), newCM("a", "2"))
}

func TestInformedWatcherStartReportsCurrentAndMissing(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		watch   []string
		want    []string
	}{
		{name: "present", objects: []runtime.Object{newCM("a", "1")}, watch: []string{"a"}, want: []string{"a=1"}},
		{name: "missing is nil", watch: []string{"a"}, want: []string{"a=<nil>"}},
		{
			name: "other namespaces are not seen",
			objects: []runtime.Object{&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "a"}, Data: map[string]string{"v": "x"},
			}},
			watch: []string{"a"},
			want:  []string{"a=<nil>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := configmap.NewInformedWatcher(kubefake.NewClientset(tt.objects...), ns)
			t.Cleanup(w.Shutdown)
			var r recorder
			for _, name := range tt.watch {
				w.Watch(name, r.observer(name))
			}
			if got := r.get(); len(got) != 0 {
				t.Fatalf("observers called before Start: %v", got)
			}
			if err := w.Start(t.Context()); err != nil {
				t.Fatalf("Start: %v", err)
			}
			// Start returns after the initial calls.
			if diff := cmp.Diff(tt.want, r.get()); diff != "" {
				t.Errorf("observer calls after Start (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInformedWatcherFollowsChanges(t *testing.T) {
	client := kubefake.NewClientset(newCM("a", "1"))
	w := configmap.NewInformedWatcher(client, ns)
	t.Cleanup(w.Shutdown)
	var r recorder
	w.Watch("a", r.observer("a"))
	w.Watch("b", r.observer("b"))
	if err := w.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Map order of the initial calls is not specified; compare as a set.
	initial := r.get()
	if diff := cmp.Diff([]string{"a=1", "b=<nil>"}, initial, sortStrings); diff != "" {
		t.Fatalf("initial calls (-want +got):\n%s", diff)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	ctx := t.Context()
	if _, err := cms.Update(ctx, newCM("a", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, append(initial, "a=2"))
	if _, err := cms.Create(ctx, newCM("b", "3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, append(initial, "a=2", "b=3"))
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, append(initial, "a=2", "b=3", "a=<nil>"))
	// A ConfigMap nobody watches calls nobody.
	if _, err := cms.Create(ctx, newCM("c", "4"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Watch after Start is called at once with the cache's content, which
	// by then holds c, and b's observers are not called again.
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var probe recorder
		w.Watch("c", probe.observer("c"))
		return cmp.Equal([]string{"c=4"}, probe.get()), nil
	}); err != nil {
		t.Fatalf("late Watch never saw c=4: %v", err)
	}
	if diff := cmp.Diff(append(initial, "a=2", "b=3", "a=<nil>"), r.get()); diff != "" {
		t.Errorf("calls at the end (-want +got):\n%s", diff)
	}
}

func TestInformedWatcherStartErrors(t *testing.T) {
	t.Run("context already ended", func(t *testing.T) {
		w := configmap.NewInformedWatcher(kubefake.NewClientset(), ns)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := w.Start(ctx)
		if err == nil || !strings.Contains(err.Error(), "namespace "+ns) {
			t.Errorf("Start with an ended context = %v, want an error naming the namespace", err)
		}
		w.Shutdown() // already stopped; must not block
	})
	t.Run("twice", func(t *testing.T) {
		w := configmap.NewInformedWatcher(kubefake.NewClientset(), ns)
		t.Cleanup(w.Shutdown)
		if err := w.Start(t.Context()); err != nil {
			t.Fatalf("first Start: %v", err)
		}
		if err := w.Start(t.Context()); err == nil {
			t.Error("second Start = nil, want an error")
		}
	})
	t.Run("shutdown before start", func(t *testing.T) {
		w := configmap.NewInformedWatcher(kubefake.NewClientset(), ns)
		w.Shutdown()
		if err := w.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "shut down before it started") {
			t.Errorf("Start after Shutdown = %v, want an error saying so", err)
		}
	})
}

// forbiddenClient refuses every list and watch of ConfigMaps, as the
// kube-apiserver does for an identity without RBAC for them: the
// informer's cache never syncs.
func forbiddenClient() *kubefake.Clientset {
	c := kubefake.NewClientset()
	refuse := func(action clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("RBAC: access denied"))
	}
	c.PrependReactor("list", "configmaps", refuse)
	c.PrependWatchReactor("configmaps", func(action clienttesting.Action) (bool, watch.Interface, error) {
		_, _, err := refuse(action)
		return true, nil, err
	})
	return c
}

// TestInformedWatcherStartReturnsWhenItsCacheCannotSync: a watcher whose
// ConfigMaps are forbidden never syncs; Start still returns, with an
// error, as soon as its context ends or Shutdown is called, however
// long-lived the context it runs on (a process runs the informer on one
// that outlives its shutdown, and bounds the wait with Shutdown).
func TestInformedWatcherStartReturnsWhenItsCacheCannotSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(w *configmap.InformedWatcher, cancel context.CancelFunc)
		want string
	}{
		{"context ends", func(_ *configmap.InformedWatcher, cancel context.CancelFunc) { cancel() }, "context canceled"},
		{"shutdown", func(w *configmap.InformedWatcher, _ context.CancelFunc) { w.Shutdown() }, "shut down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := configmap.NewInformedWatcher(forbiddenClient(), ns)
			var r recorder
			w.Watch("a", r.observer("a"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan error, 1)
			go func() { started <- w.Start(ctx) }()
			// Let Start reach its wait (it cannot sync, so it is there or
			// about to be); a stop before it starts must work too (below).
			time.Sleep(100 * time.Millisecond)
			tc.stop(w, cancel)
			select {
			case err := <-started:
				if err == nil || !strings.Contains(err.Error(), "cache not synced") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Start = %v, want an error with %q and \"cache not synced\"", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				// A guard against a hang, not a figure: the stop is prompt.
				t.Fatal("Start still waiting 10 s after the stop: it waits for a cache that cannot sync")
			}
			w.Shutdown()
			if got := r.get(); len(got) != 0 {
				t.Errorf("observers called %v, want none: the cache never synced", got)
			}
		})
	}
	t.Run("shutdown racing start", func(t *testing.T) {
		for range 50 {
			w := configmap.NewInformedWatcher(forbiddenClient(), ns)
			started := make(chan error, 1)
			go func() { started <- w.Start(context.Background()) }()
			w.Shutdown()
			select {
			case err := <-started:
				if err == nil {
					t.Fatal("Start = nil, want an error: its ConfigMaps are forbidden")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Start still waiting 10 s after a Shutdown that raced it")
			}
		}
	})
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
})
