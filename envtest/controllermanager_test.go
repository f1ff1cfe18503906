package envtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// lifecycleTimeout bounds how long a test waits for kube-controller-manager.
// The garbage collector starts after discovering every resource and syncing
// an informer for each, a few seconds on a quiet machine.
const lifecycleTimeout = 90 * time.Second

// TestControllerManagerGarbageCollectsOwnedConfigMap deletes an owner with
// each propagation policy and checks that the real garbage collector does
// what the policy says to the ConfigMap it owns. Without
// kube-controller-manager, the owner of a foreground or orphan deletion
// would stay behind its finalizer and the dependent would never change.
func TestControllerManagerGarbageCollectsOwnedConfigMap(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "gc-")

	tests := []struct {
		policy metav1.DeletionPropagation
		// wantDependent is whether the dependent outlives its owner.
		wantDependent bool
	}{
		{policy: metav1.DeletePropagationBackground},
		{policy: metav1.DeletePropagationForeground},
		{policy: metav1.DeletePropagationOrphan, wantDependent: true},
	}
	for _, tc := range tests {
		t.Run(string(tc.policy), func(t *testing.T) {
			ctx := t.Context()
			configMaps := kube.CoreV1().ConfigMaps(ns)
			owner, err := configMaps.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "owner-"},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create owner: %v", err)
			}
			dependent, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				GenerateName: "dependent-",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion:         "v1",
					Kind:               "ConfigMap",
					Name:               owner.Name,
					UID:                owner.UID,
					BlockOwnerDeletion: new(true),
				}},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create dependent: %v", err)
			}

			if err := configMaps.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &tc.policy}); err != nil {
				t.Fatalf("delete owner: %v", err)
			}
			waitGone(t, "owner "+owner.Name, func(ctx context.Context) error {
				_, err := configMaps.Get(ctx, owner.Name, metav1.GetOptions{})
				return err
			})
			if !tc.wantDependent {
				waitGone(t, "dependent "+dependent.Name, func(ctx context.Context) error {
					_, err := configMaps.Get(ctx, dependent.Name, metav1.GetOptions{})
					return err
				})
				return
			}
			got, err := configMaps.Get(ctx, dependent.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("orphaned dependent: %v", err)
			}
			if diff := cmp.Diff([]metav1.OwnerReference(nil), got.OwnerReferences); diff != "" {
				t.Errorf("orphaned dependent's owner references (-want +got):\n%s", diff)
			}
		})
	}
}

// TestControllerManagerCompletesNamespaceDeletion deletes a namespace that
// holds objects and waits for the real namespace controller to empty it
// and remove it.
func TestControllerManagerCompletesNamespaceDeletion(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "ns-delete-")
	for _, name := range []string{"a", "b"} {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ConfigMap %s/%s: %v", ns, name, err)
		}
	}

	if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace %s: %v", ns, err)
	}
	waitGone(t, "namespace "+ns, func(ctx context.Context) error {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
}

// waitGone polls get until it reports NotFound, failing t after
// lifecycleTimeout with the last answer.
func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, lifecycleTimeout, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		if apierrors.IsNotFound(last) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s still there after %v (last get: %v)", what, lifecycleTimeout, last)
	}
}
