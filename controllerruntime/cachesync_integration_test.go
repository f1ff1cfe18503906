package controllerruntime_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"

	bindkitcr "github.com/bindkit/bindkit/controllerruntime"
	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/sinkbinding/pkg/reconciler/sinkbinding"
	"github.com/bindkit/bindkit/test/fixturebinding"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/wiring"
)

// impersonated returns the control plane's config acting as user, whom
// a ClusterRole of rules is bound to for the test's length.
func impersonated(t *testing.T, env *testenv.Environment, user string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
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
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// everythingButConfigMaps is all bindkit reads and writes, in every
// group it uses, but ConfigMaps: its ConfigMap watcher's cache cannot
// sync.
var everythingButConfigMaps = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets", "events", "pods", "services"}, Verbs: []string{"*"}},
	{APIGroups: []string{"apps", "batch", "admissionregistration.k8s.io", "coordination.k8s.io", "events.k8s.io",
		sinkv1alpha1.SchemeGroupVersion.Group, fixturebinding.Group}, Resources: []string{"*"}, Verbs: []string{"*"}},
}

// TestManagerWithBindkitCachesThatCannotSyncStops runs a Manager whose
// identity may not read ConfigMaps (impersonated, on the real
// kube-apiserver), so bindkit's ConfigMap watcher never syncs: the
// Manager stops with an error naming them at CacheSyncTimeout (the
// Manager's own setting, which bindkit takes by default), and when its
// context is cancelled first (SIGTERM under ctrl.SetupSignalHandler) it
// returns without waiting out its graceful-shutdown period. Meanwhile
// bindkit's readiness check fails; once bindkit failed, its liveness
// check does too. Before the fix, the runnable waited on a context no one
// cancelled: the Manager ran on past the timeout, and on cancel waited
// its 30 s grace period and returned "failed waiting for all runnables to
// end".
func TestManagerWithBindkitCachesThatCannotSyncStops(t *testing.T) {
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	env := controlPlane.Env(t)
	cfg := impersonated(t, env, "bindkit-no-configmaps", everythingButConfigMaps)
	run := func(t *testing.T, opts ctrl.Options) (done chan error, cancel context.CancelFunc, probePort int, started time.Time) {
		_, mgr, probePort := newManager(t, cfg, opts, bindkitcr.Options{Kinds: []*wiring.Kind{kind}})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done = make(chan error, 1)
		started = time.Now()
		go func() { done <- mgr.Start(ctx) }()
		// bindkit's runnable has begun waiting for its caches.
		poll(t, time.Minute, "bindkit's readiness to say its informers have not synced", func() string {
			if code, body := check(probePort, "readyz/"+bindkitcr.ReadyzCheckName); code != http.StatusInternalServerError || !strings.Contains(body, "informers have not synced") {
				return body
			}
			return ""
		})
		return done, cancel, probePort, started
	}

	t.Run("at CacheSyncTimeout", func(t *testing.T) {
		const timeout = 5 * time.Second
		done, _, _, started := run(t, ctrl.Options{Controller: config.Controller{CacheSyncTimeout: timeout}})
		select {
		case err := <-done:
			t.Logf("the Manager returned %s after Start: %v", time.Since(started).Round(time.Millisecond), err)
			if err == nil || !strings.Contains(err.Error(), "ConfigMaps in namespace") || !strings.Contains(err.Error(), "CacheSyncTimeout 5s") {
				t.Errorf("Manager.Start = %v, want an error naming the ConfigMaps and the timeout", err)
			}
		case <-time.After(10 * timeout):
			// A guard against a hang, not a figure.
			t.Fatalf("the Manager still runs %s after its CacheSyncTimeout of %s", 10*timeout, timeout)
		}
	})

	t.Run("on cancel", func(t *testing.T) {
		// The default timeout (2 minutes) is far off: only the cancel ends it.
		done, cancel, _, _ := run(t, ctrl.Options{})
		cancelled := time.Now()
		cancel()
		select {
		case err := <-done:
			t.Logf("the Manager returned %s after its context was cancelled", time.Since(cancelled).Round(time.Millisecond))
			if err != nil {
				t.Errorf("Manager.Start after cancel = %v, want nil: bindkit's runnable must end with its context", err)
			}
		case <-time.After(20 * time.Second):
			// A guard, below the Manager's 30 s grace period that the bug
			// waited out.
			t.Fatal("the Manager still runs 20 s after its context was cancelled")
		}
	})
}

// TestLivenessFailsOnceBindkitFailed: when bindkit's runnable has failed
// but the Manager is still running (its other runnables draining, here
// held by a runnable that ignores its context for a moment), /healthz
// fails, naming the failure.
func TestLivenessFailsOnceBindkitFailed(t *testing.T) {
	kind, err := sinkbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	env := controlPlane.Env(t)
	cfg := impersonated(t, env, "bindkit-no-configmaps-2", everythingButConfigMaps)
	grace := 20 * time.Second
	_, mgr, probePort := newManager(t, cfg, ctrl.Options{Controller: config.Controller{CacheSyncTimeout: 2 * time.Second}, GracefulShutdownTimeout: &grace},
		bindkitcr.Options{Kinds: []*wiring.Kind{kind}})
	release := make(chan struct{})
	if err := mgr.Add(runnableFunc(func(context.Context) error { <-release; return nil })); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(context.Background()) }()
	poll(t, time.Minute, "the Manager's liveness to fail naming bindkit's failure", func() string {
		if code, body := check(probePort, "healthz/"+bindkitcr.HealthzCheckName); code != http.StatusInternalServerError || !strings.Contains(body, "ConfigMaps in namespace") {
			return body
		}
		return ""
	})
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "ConfigMaps") {
		t.Errorf("Manager.Start = %v, want bindkit's error", err)
	}
}

// runnableFunc is a manager.Runnable.
type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }
