package bench

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
)

// boundWatch follows the Deployments of one namespace with an informer
// (a list, then a watch: no polling) and closes all once each of them has
// been seen bound. It is how the bind benchmarks know when they are done:
// the same watcher for bindkit and for the floor.
type boundWatch struct {
	want    int
	isBound func(*appsv1.Deployment) bool
	stop    chan struct{}

	mu    sync.Mutex
	bound map[string]bool
	all   chan struct{}
}

// watchBound starts the watcher and returns once its cache holds want
// Deployments of ns, none of them bound. It stops with tb.
func watchBound(tb testing.TB, kube kubernetes.Interface, ns string, want int, isBound func(*appsv1.Deployment) bool) *boundWatch {
	tb.Helper()
	w := &boundWatch{want: want, isBound: isBound, stop: make(chan struct{}), bound: map[string]bool{}, all: make(chan struct{})}
	inf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns)).Apps().V1().Deployments().Informer()
	see := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok && w.isBound(d) {
			w.mark(d.Name)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
	}); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(w.stop) }()
	tb.Cleanup(func() { w.close(); <-done })
	if !cache.WaitForCacheSync(w.stop, inf.HasSynced) {
		tb.Fatalf("watch of Deployments in %s did not sync", ns)
	}
	if n := len(inf.GetStore().ListKeys()); n != want {
		tb.Fatalf("namespace %s holds %d Deployments, want %d", ns, n, want)
	}
	if n := w.count(); n != 0 {
		tb.Fatalf("namespace %s: %d Deployments bound before the benchmark began", ns, n)
	}
	return w
}

func (w *boundWatch) mark(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bound[name] {
		return
	}
	w.bound[name] = true
	if len(w.bound) == w.want {
		close(w.all)
	}
}

func (w *boundWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

func (w *boundWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}

// wait returns once every Deployment has been seen bound, or an error after
// timeout, or as soon as failed reports one (a process that died, say).
func (w *boundWatch) wait(timeout time.Duration, failed func() error) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.all:
			return nil
		case <-deadline:
			return fmt.Errorf("after %s, %d of %d Deployments bound", timeout, w.count(), w.want)
		case <-tick.C:
			if failed != nil {
				if err := failed(); err != nil {
					return fmt.Errorf("%d of %d Deployments bound: %w", w.count(), w.want, err)
				}
			}
		}
	}
}

// githubBound reports whether d carries what a GithubBinding's Do adds: the
// Secret volume and its mount in every container and init container.
func githubBound(d *appsv1.Deployment) bool {
	spec := &d.Spec.Template.Spec
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == v1alpha1.VolumeName && v.Secret != nil
	}) {
		return false
	}
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range containers {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == v1alpha1.VolumeName && m.MountPath == v1alpha1.MountPath
			}) {
				return false
			}
		}
	}
	return true
}
