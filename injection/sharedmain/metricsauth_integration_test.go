package sharedmain

import (
	"context"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/test/scrape"
)

// TestMetricsAuthWithRealAPIServer runs the process with the default
// metrics settings (but the address: 127.0.0.1 and a port the kernel
// picks) against the real kube-apiserver, which reviews every token: a
// scrape without a token, or with one it does not know, is refused 401;
// a ServiceAccount without a grant of get on /metrics 403; one bound to a
// metrics-reader ClusterRole, and the cluster's admin, are answered with
// the process's metrics. With --metrics-secure=false the metrics are
// served over plain HTTP to anyone.
func TestMetricsAuthWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	systemNS := createNamespace(t, kube, "metrics-system-")
	scrapers := createNamespace(t, kube, "metrics-scrapers-")
	reader := serviceAccountToken(t, kube, scrapers, "reader")
	stranger := serviceAccountToken(t, kube, scrapers, "stranger")
	grantMetricsReader(t, kube, scrapers, "reader")

	run := func(t *testing.T, flags Flags) ListenAddresses {
		flags = onAnyPort(t, flags)
		logs := &syncBuffer{}
		ctx, cancel := context.WithCancel(t.Context())
		ctx = injection.WithSystemNamespace(WithLogOutput(WithFlags(ctx, flags), logs), systemNS)
		exited := make(chan error, 1)
		go func() { exited <- Run(ctx, "metrics-auth", recordingController(&recorder{})) }()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(time.Minute):
				t.Error("Run did not return within a minute")
			}
			if t.Failed() {
				t.Logf("process logs:\n%s", logs.String())
			}
		})
		return listenAddresses(t, flags)
	}

	t.Run("default", func(t *testing.T) {
		url := "https://" + run(t, Flags{Kubeconfig: env.KubeconfigPath, DisableHA: true}).Metrics + MetricsPath
		// The process listens before its controllers run.
		poll(t, "the metrics-reader scrapes the controller's leadership", func(ctx context.Context) (bool, error) {
			f, err := scrape.GetWithToken(ctx, url, reader)
			return err == nil && f.Has("bindkit_leader", map[string]string{"controller": "recorder"}), nil
		})
		for _, c := range []struct {
			who, token string
			want       int
		}{
			{"no token", "", http.StatusUnauthorized},
			{"a made-up token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", http.StatusUnauthorized},
			{"a ServiceAccount without the grant", stranger, http.StatusForbidden},
			{"a ServiceAccount bound to the metrics-reader role", reader, http.StatusOK},
			{"the cluster's admin", env.Config.BearerToken, http.StatusOK},
			// From memory this time: the same answers.
			{"the metrics-reader again", reader, http.StatusOK},
			{"the ServiceAccount without the grant again", stranger, http.StatusForbidden},
		} {
			f, err := scrape.GetWithToken(t.Context(), url, c.token)
			if got := scrape.Status(err); got != c.want {
				t.Errorf("scrape by %s: %v, want %d", c.who, err, c.want)
				continue
			}
			if c.want == http.StatusOK && !f.Has("bindkit_leader", map[string]string{"controller": "recorder"}) {
				t.Errorf("scrape by %s: no bindkit_leader{controller=recorder} among %d families", c.who, len(f))
			}
		}
	})

	t.Run("plain HTTP", func(t *testing.T) {
		addr := run(t, Flags{Kubeconfig: env.KubeconfigPath, DisableHA: true, MetricsInsecure: true}).Metrics
		poll(t, "a scrape over plain HTTP without a token reads the controller's leadership", func(ctx context.Context) (bool, error) {
			f, err := scrape.Get(ctx, "http://"+addr+MetricsPath)
			return err == nil && f.Has("bindkit_leader", map[string]string{"controller": "recorder"}), nil
		})
		if _, err := scrape.GetWithToken(t.Context(), "https://"+addr+MetricsPath, reader); err == nil {
			t.Error("plain HTTP answered over HTTPS")
		}
	})
}

// serviceAccountToken creates ServiceAccount namespace/name and returns a
// token of it from the TokenRequest API, as a pod of it mounts.
func serviceAccountToken(t *testing.T, kube kubernetes.Interface, namespace, name string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// grantMetricsReader binds ServiceAccount namespace/name to a ClusterRole
// allowing get on /metrics (config/'s metrics-reader), and waits until the
// kube-apiserver's authorizer says so: the process keeps a refusal for
// DefaultMetricsDenyTTL.
func grantMetricsReader(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Helper()
	ctx := t.Context()
	role, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{MetricsPath}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	user := "system:serviceaccount:" + namespace + ":" + name
	poll(t, "the kube-apiserver allows "+user+" to get /metrics", func(ctx context.Context) (bool, error) {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: MetricsPath, Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	})
}
