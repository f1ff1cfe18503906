package injection_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/injection"
)

// TestNamedKubeInformerFactoryWithRealAPIServer: an informer from the
// named factory lists and watches one cluster-scoped object, under a user
// whose RBAC grants list and watch on that name only (resourceNames), as
// config/ grants the controller its MutatingWebhookConfiguration.
func TestNamedKubeInformerFactoryWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	const mine, other, user = "named-factory-mine.bindkit.dev", "named-factory-other.bindkit.dev", "named-factory-user"
	configs := admin.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, name := range []string{mine, other} {
		if _, err := configs.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { configs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
		ResourceNames: []string{mine}, Verbs: []string{"get", "list", "watch"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
	})

	limited := rest.CopyConfig(env.Config)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}
	ictx, set, err := injection.New(ctx, limited, injection.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Shutdown)
	informer := injection.NamedKubeInformerFactory(ictx, mine).Admissionregistration().V1().MutatingWebhookConfigurations()
	lister := informer.Lister()
	set.Start(ictx)
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := set.WaitForCacheSync(syncCtx); err != nil {
		t.Fatalf("named informer under resourceNames RBAC: %v", err)
	}
	list, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{mine}, names); diff != "" {
		t.Errorf("configurations seen (-want +got):\n%s", diff)
	}

	// The watch delivers changes of the one object.
	cfg, err := configs.Get(ctx, mine, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Labels = map[string]string{"changed": "yes"}
	if _, err := configs.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := lister.Get(mine)
		if err == nil && got.Labels["changed"] == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the named informer did not see the update within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
