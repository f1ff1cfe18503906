package sharedmain

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindkit/bindkit/injection"
)

// TestRunWithConfigMapsForbiddenStopsWithRealAPIServer runs the shared
// main, default flags but its ports, as an identity that may do all it
// does but read ConfigMaps (a kubeconfig impersonating it), so its
// ConfigMap watcher never syncs: Run returns an error naming the ConfigMaps at CacheSyncTimeout (2
// minutes: the test waits them, as a process would), and at once when
// its context is cancelled first (SIGTERM). Before the fix Run waited on
// a context no one cancelled: it never returned, either way.
func TestRunWithConfigMapsForbiddenStopsWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	const user = "sharedmain-no-configmaps"
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets", "events", "pods", "services"}, Verbs: []string{"*"}},
		{APIGroups: []string{"coordination.k8s.io", "admissionregistration.k8s.io", "events.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	kubeconfig, err := clientcmd.LoadFromFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range kubeconfig.AuthInfos {
		auth.Impersonate = user
	}
	limited := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, limited); err != nil {
		t.Fatal(err)
	}

	// run starts Run as that identity and waits until it listens, which it
	// does just before it waits for its caches.
	run := func(t *testing.T) (cancel context.CancelFunc, exited chan error) {
		systemNS := createNamespace(t, admin, "sharedmain-system-")
		logs := &syncBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		flags := onAnyPort(t, Flags{Kubeconfig: limited, WebhookAddress: "127.0.0.1",
			WebhookIPSANs: []net.IP{net.ParseIP("127.0.0.1")}, WebhookGracePeriod: time.Second})
		ctx = injection.WithSystemNamespace(WithLogOutput(WithFlags(ctx, flags), logs), systemNS)
		exited = make(chan error, 1)
		go func() { exited <- Run(ctx, "it", newDenierController("/deny")) }()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("process logs:\n%s", logs.String())
			}
		})
		// It listens, then waits for its caches.
		listenAddresses(t, flags)
		return cancel, exited
	}

	t.Run("at CacheSyncTimeout", func(t *testing.T) {
		t.Parallel()
		_, exited := run(t)
		started := time.Now()
		select {
		case err := <-exited:
			t.Logf("Run returned %s after the process was up: %v", time.Since(started).Round(time.Second), err)
			if err == nil || !strings.Contains(err.Error(), "ConfigMaps in namespace") || !strings.Contains(err.Error(), "CacheSyncTimeout") {
				t.Errorf("Run = %v, want an error naming the ConfigMaps and CacheSyncTimeout", err)
			}
		case <-time.After(CacheSyncTimeout + time.Minute):
			// A guard against a hang, not a figure.
			t.Fatalf("Run still running %s after it was up, past CacheSyncTimeout %s", CacheSyncTimeout+time.Minute, CacheSyncTimeout)
		}
	})
	t.Run("on cancel", func(t *testing.T) {
		t.Parallel()
		cancel, exited := run(t)
		cancelled := time.Now()
		cancel()
		select {
		case err := <-exited:
			t.Logf("Run returned %s after the cancel: %v", time.Since(cancelled).Round(time.Millisecond), err)
		case <-time.After(30 * time.Second):
			// A guard against a hang, not a figure.
			t.Fatal("Run still running 30 s after its context was cancelled")
		}
	})
}
