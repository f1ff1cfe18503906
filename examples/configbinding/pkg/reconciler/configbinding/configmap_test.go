package configbinding

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

const ns = "shop"

func newConfigBinding() *v1alpha1.ConfigBinding {
	return &v1alpha1.ConfigBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: types.UID("binding-uid"), Generation: 1, ResourceVersion: "1"},
		Spec: v1alpha1.ConfigBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Data:    map[string]string{"LOG_LEVEL": "debug"},
		},
	}
}

// ownedConfigMap is the ConfigMap the binding calls for, with data.
func ownedConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "configbinding-cfg-bindinguid", UID: "cm-uid", ResourceVersion: "1",
			Labels: map[string]string{BindingLabel: "cfg"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "bindings.bindkit.dev/v1alpha1", Kind: "ConfigBinding", Name: "cfg", UID: "binding-uid",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data: data,
	}
}

func foreignConfigMap() *corev1.ConfigMap {
	cm := ownedConfigMap(map[string]string{"MINE": "yes"})
	cm.OwnerReferences = nil
	return cm
}

func newConfigMapReconciler(t *testing.T, existing ...*corev1.ConfigMap) (*ConfigMapReconciler, *kubefake.Clientset) {
	t.Helper()
	kube := kubefake.NewClientset()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, cm := range existing {
		if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := indexer.Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	return &ConfigMapReconciler{Kube: kube, Lister: corelisters.NewConfigMapLister(indexer)}, kube
}

func TestConfigMapReconcilerReconcile(t *testing.T) {
	tests := []struct {
		name     string
		existing []*corev1.ConfigMap
		want     *corev1.ConfigMap // nil: as existing
		wantErr  bool
		writes   int
	}{{
		name:   "creates a missing ConfigMap, controlled by the binding",
		want:   ownedConfigMap(map[string]string{"LOG_LEVEL": "debug"}),
		writes: 1,
	}, {
		name:     "updates stale data",
		existing: []*corev1.ConfigMap{ownedConfigMap(map[string]string{"LOG_LEVEL": "info", "OLD": "x"})},
		want:     ownedConfigMap(map[string]string{"LOG_LEVEL": "debug"}),
		writes:   1,
	}, {
		name:     "leaves an up-to-date ConfigMap alone",
		existing: []*corev1.ConfigMap{ownedConfigMap(map[string]string{"LOG_LEVEL": "debug"})},
		want:     ownedConfigMap(map[string]string{"LOG_LEVEL": "debug"}),
		writes:   0,
	}, {
		name:     "refuses to take over someone else's ConfigMap",
		existing: []*corev1.ConfigMap{foreignConfigMap()},
		want:     foreignConfigMap(),
		wantErr:  true,
		writes:   0,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, kube := newConfigMapReconciler(t, tc.existing...)
			kube.ClearActions()
			err := r.Reconcile(context.Background(), newConfigBinding())
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error %v", err, tc.wantErr)
			}
			if got := len(kube.Actions()); got != tc.writes {
				t.Errorf("%d writes, want %d: %v", got, tc.writes, kube.Actions())
			}
			got, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "configbinding-cfg-bindinguid", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ignore := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
				cm = cm.DeepCopy()
				cm.TypeMeta, cm.UID, cm.ResourceVersion, cm.ManagedFields = metav1.TypeMeta{}, "", "", nil
				return cm
			}
			if diff := cmp.Diff(ignore(tc.want), ignore(got)); diff != "" {
				t.Errorf("ConfigMap (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigMapReconcilerReconcileDeletion(t *testing.T) {
	tests := []struct {
		name      string
		existing  []*corev1.ConfigMap
		wantGone  bool
		wantError bool
	}{
		{name: "deletes the binding's ConfigMap", existing: []*corev1.ConfigMap{ownedConfigMap(nil)}, wantGone: true},
		{name: "a missing ConfigMap is no error", wantGone: true},
		{name: "keeps someone else's ConfigMap", existing: []*corev1.ConfigMap{foreignConfigMap()}, wantGone: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, kube := newConfigMapReconciler(t, tc.existing...)
			if err := r.ReconcileDeletion(context.Background(), newConfigBinding()); err != nil {
				t.Fatalf("ReconcileDeletion: %v", err)
			}
			_, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "configbinding-cfg-bindinguid", metav1.GetOptions{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("ConfigMap gone = %v (get error %v), want %v", gone, err, tc.wantGone)
			}
		})
	}
}

func TestWithContextNamesTheConfigMap(t *testing.T) {
	ctx, err := WithContext(context.Background(), newConfigBinding())
	if err != nil {
		t.Fatal(err)
	}
	name, ok := v1alpha1.ConfigMapNameFrom(ctx)
	if diff := cmp.Diff("configbinding-cfg-bindinguid", name); diff != "" || !ok {
		t.Errorf("ConfigMap name in context (-want +got), ok=%v:\n%s", ok, diff)
	}
}
