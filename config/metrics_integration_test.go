package config

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
	"github.com/bindkit/bindkit/test/scrape"
	"github.com/bindkit/bindkit/webhook"
)

// The label values the example's metrics carry.
var (
	bindingResource   = v1alpha1.GroupVersionResource().GroupResource().String()
	reconcilerName    = githubbinding.ControllerName
	admissionName     = githubbinding.WebhookConfigurationName
	certificatesName  = sharedmain.CertificatesControllerName
	fieldManagerNamed = "githubbinding-controller" // the component sharedmain.Main is given
)

// metricsOf scrapes the controller's metrics endpoint as Prometheus
// would: over HTTPS, with the token of a ServiceAccount bound to config/'s
// metrics-reader role (scraperToken).
func (w *walk) metricsOf(address string) scrape.Families {
	w.t.Helper()
	f, err := scrape.GetWithToken(w.ctx, "https://"+address+sharedmain.MetricsPath, w.scraperToken)
	if err != nil {
		w.t.Fatal(err)
	}
	return f
}

// metricsUser is the ServiceAccount the walk scrapes as, bound to
// config/'s metrics-reader role as docs/security.md says, in a namespace
// of its own (as a cluster's monitoring is).
const metricsUser = "prometheus"

// bindMetricsScraper creates the walk's scraper, a ServiceAccount bound to
// config/'s metrics-reader ClusterRole, and one bound to nothing, and
// sets the walk's scraperToken and strangerToken to tokens of each. It
// waits until the kube-apiserver authorizes the scraper, since the
// controller keeps a refusal for 10 seconds.
func (w *walk) bindMetricsScraper() {
	t, ctx := w.t, w.ctx
	ns := w.env.CreateNamespace(t, "monitoring-")
	w.scraperToken = w.serviceAccountToken(ns, metricsUser)
	w.strangerToken = w.serviceAccountToken(ns, "stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "prometheus-metrics-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: metricsUser}},
	}
	binding, err := w.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	user := "system:serviceaccount:" + ns + ":" + metricsUser
	w.poll(user+" may get /metrics", func() (string, error) {
		sar, err := w.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: sharedmain.MetricsPath, Verb: "get"},
		}}, metav1.CreateOptions{})
		if err != nil || !sar.Status.Allowed {
			return "not yet", err
		}
		return "", nil
	})
}

// serviceAccountToken creates ServiceAccount namespace/name and returns a
// token of it from the TokenRequest API.
func (w *walk) serviceAccountToken(namespace, name string) string {
	w.t.Helper()
	if _, err := w.kube.CoreV1().ServiceAccounts(namespace).Create(w.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := w.kube.CoreV1().ServiceAccounts(namespace).CreateToken(w.ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// checkMetricsRefused: the example binary, run with its default metrics
// settings under config/'s RBAC, refuses a scrape without a token, or
// with one the kube-apiserver does not know (401), and one of a
// ServiceAccount config/'s metrics-reader role is not bound to (403), and
// answers the one it is bound to with its metrics.
func (w *walk) checkMetricsRefused(address string) {
	url := "https://" + address + sharedmain.MetricsPath
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a made-up token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader role", w.strangerToken, http.StatusForbidden},
		{"a ServiceAccount bound to the metrics-reader role", w.scraperToken, http.StatusOK},
	} {
		f, err := scrape.GetWithToken(w.ctx, url, c.token)
		if got := scrape.Status(err); got != c.want {
			w.t.Errorf("scrape by %s: %v, want %d", c.who, err, c.want)
		}
		if c.want == http.StatusOK && !f.Has("bindkit_leader", map[string]string{"controller": reconcilerName}) {
			w.t.Errorf("scrape by %s: no bindkit_leader{controller=%s}", c.who, reconcilerName)
		}
	}
	if _, err := scrape.Get(w.ctx, "http://"+address+sharedmain.MetricsPath); scrape.Status(err) != http.StatusBadRequest {
		w.t.Errorf("scrape over plain HTTP: %v, want 400 (an HTTP request to an HTTPS server)", err)
	}
}

// pollMetrics scrapes until ok accepts a scrape, or fails the test.
func (w *walk) pollMetrics(what, address string, ok func(scrape.Families) string) scrape.Families {
	w.t.Helper()
	var last scrape.Families
	w.poll(what, func() (string, error) {
		f, err := scrape.GetWithToken(w.ctx, "https://"+address+sharedmain.MetricsPath, w.scraperToken)
		if err != nil {
			return "", err
		}
		last = f
		return ok(f), nil
	})
	return last
}

// moved is a metric's change between two scrapes.
type moved struct {
	name   string
	labels map[string]string
	// least is the smallest change accepted; exact, when set, the only one.
	least float64
	exact bool
}

func (m moved) check(before, after scrape.Families) string {
	d := after.Sum(m.name, m.labels) - before.Sum(m.name, m.labels)
	if (m.exact && d != m.least) || d < m.least {
		want := fmt.Sprintf("at least %g", m.least)
		if m.exact {
			want = fmt.Sprintf("%g", m.least)
		}
		return fmt.Sprintf("%s%v moved by %g, want %s", m.name, m.labels, d, want)
	}
	return ""
}

// checkMetricsAfterWalk compares the scrapes taken before and after the
// walkthrough (run): what it did must show in the metrics by the amounts
// it did it.
func (w *walk) checkMetricsAfterWalk(address string, before scrape.Families) {
	t := w.t
	true_, false_ := "true", "false"
	checks := []moved{
		// Five subjects bound by the reconciler (Deployment, StatefulSet,
		// DaemonSet, ReplicaSet, CronJob), one unbound (web's Binding
		// deleted).
		{name: "bindkit_subject_patches_total", labels: map[string]string{"resource": bindingResource, "action": "bind"}, least: 5},
		{name: "bindkit_subject_patches_total", labels: map[string]string{"resource": bindingResource, "action": "unbind"}, least: 1, exact: true},
		{name: "bindkit_reconcile_total", labels: map[string]string{"controller": reconcilerName, "outcome": "success"}, least: 8},
		{name: "bindkit_reconcile_duration_seconds", labels: map[string]string{"controller": reconcilerName}, least: 9},
		{name: "bindkit_workqueue_adds_total", labels: map[string]string{"controller": reconcilerName}, least: 9},
		{name: "bindkit_workqueue_queue_duration_seconds", labels: map[string]string{"controller": reconcilerName}, least: 9},
		{name: "bindkit_workqueue_work_duration_seconds", labels: map[string]string{"controller": reconcilerName}, least: 9},
		// Admission: the dry-run probe (at least once, it is polled), the
		// bare Pod and the Job patched, the refused Deployment.
		{name: "bindkit_admission_requests_total", labels: map[string]string{"path": githubbinding.WebhookPath, "operation": "CREATE", "outcome": "patched", "dry_run": true_}, least: 1},
		{name: "bindkit_admission_requests_total", labels: map[string]string{"path": githubbinding.WebhookPath, "operation": "CREATE", "outcome": "patched", "dry_run": false_}, least: 2},
		{name: "bindkit_admission_requests_total", labels: map[string]string{"path": githubbinding.WebhookPath, "operation": "CREATE", "outcome": "refused", "dry_run": true_}, least: 1, exact: true},
		{name: "bindkit_admission_duration_seconds", labels: map[string]string{"path": githubbinding.WebhookPath, "outcome": "patched"}, least: 3},
		{name: "bindkit_admission_patch_bytes", labels: map[string]string{"path": githubbinding.WebhookPath}, least: 3},
		// client-go's hooks: the subject patches went out, and waited on
		// the rate limiter (which records every request, throttled or not).
		{name: "bindkit_client_requests_total", labels: map[string]string{"method": "PATCH", "code": "200"}, least: 6},
		{name: "bindkit_client_request_duration_seconds", labels: map[string]string{"verb": "PATCH"}, least: 6},
		{name: "bindkit_client_rate_limiter_duration_seconds", labels: map[string]string{"verb": "PATCH"}, least: 6},
	}
	// Gauges read as the walkthrough left things, once the controllers have
	// caught up with it: the admission index, say, is rebuilt a moment
	// after the last Binding event.
	gauges := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"bindkit_leader", map[string]string{"controller": reconcilerName}, 1},
		{"bindkit_leader", map[string]string{"controller": admissionName}, 1},
		{"bindkit_leader", map[string]string{"controller": certificatesName}, 1},
		// Nine Bindings created, web's deleted.
		{"bindkit_admission_index_bindings", map[string]string{"path": githubbinding.WebhookPath, "resource": bindingResource}, 8},
		{"bindkit_workqueue_depth", map[string]string{"controller": reconcilerName}, 0},
	}
	after := w.pollMetrics("metrics of the walkthrough", address, func(f scrape.Families) string {
		var failed []string
		for _, c := range checks {
			if msg := c.check(before, f); msg != "" {
				failed = append(failed, msg)
			}
		}
		for _, g := range gauges {
			if got := f.Sum(g.name, g.labels); got != g.want {
				failed = append(failed, fmt.Sprintf("%s%v = %g, want %g", g.name, g.labels, got, g.want))
			}
		}
		return strings.Join(failed, "; ")
	})
	// db, agent, rs and nightly bound by the reconciler; the Pod and the
	// Job bound at admission are the Bindings' subjects too, once
	// reconciled. web is no longer bound.
	if got := after.Sum("bindkit_subjects_bound", map[string]string{"resource": bindingResource}); got < 4 || got > 6 {
		t.Errorf("bindkit_subjects_bound{resource=%s} = %g, want 4 to 6", bindingResource, got)
	}
	now := float64(time.Now().Unix())
	for _, cert := range []string{"ca", "serving"} {
		labels := map[string]string{"certificate": cert}
		if exp := after.Sum("bindkit_certificate_expiry_timestamp_seconds", labels); exp < now+3600 {
			t.Errorf("bindkit_certificate_expiry_timestamp_seconds%v = %g, want more than an hour after now (%g)", labels, exp, now)
		}
		// config/'s Secret is empty: the leader wrote the first CA and
		// serving certificate.
		if got := after.Sum("bindkit_certificate_rotations_total", labels); got < 1 {
			t.Errorf("bindkit_certificate_rotations_total%v = %g, want at least 1", labels, got)
		}
	}
	// Labels stay bounded: no Binding's or subject's name is a label value.
	for name, mf := range after {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if slices.Contains([]string{"web", "db", "agent", "rs", "nightly", "single", "once", w.ns}, l.GetValue()) {
					t.Errorf("%s has label %s=%q, an object's name", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// refusedAtAdmission asks for a Deployment (dry run) that the "later"
// Binding's selector matches with more containers than the webhook
// admits: the API server denies it with the webhook's 413.
func (w *walk) refusedAtAdmission() {
	containers := make([]corev1.Container, webhook.DefaultMaxContainers+1)
	for i := range containers {
		containers[i] = corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "app"}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "too-many", Labels: map[string]string{"pod": "x"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pod": "x"}}, Spec: corev1.PodSpec{Containers: containers}}}}
	_, err := w.kube.AppsV1().Deployments(w.ns).Create(w.ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "containers") {
		w.t.Errorf("Deployment with %d containers: %v, want the webhook's refusal", len(containers), err)
	}
}

// checkRotationMetrics waits for the leader's new CA (the Secret was
// deleted) to show as a rotation.
func (w *walk) checkRotationMetrics(address string, before scrape.Families) {
	checks := []moved{
		{name: "bindkit_certificate_rotations_total", labels: map[string]string{"certificate": "ca"}, least: 1, exact: true},
		{name: "bindkit_certificate_rotations_total", labels: map[string]string{"certificate": "serving"}, least: 1, exact: true},
		{name: "bindkit_reconcile_total", labels: map[string]string{"controller": certificatesName, "outcome": "success"}, least: 1},
	}
	w.pollMetrics("certificate rotation counted", address, func(f scrape.Families) string {
		var failed []string
		for _, c := range checks {
			if msg := c.check(before, f); msg != "" {
				failed = append(failed, msg)
			}
		}
		return strings.Join(failed, "; ")
	})
}

// checkFieldManagers checks that the controller's writes name it in
// managedFields: a subject it bound, and the webhook configuration it
// keeps.
func (w *walk) checkFieldManagers() {
	t, ctx := w.t, w.ctx
	managers := func(fields []metav1.ManagedFieldsEntry) []string {
		var out []string
		for _, f := range fields {
			out = append(out, f.Manager+"/"+string(f.Operation))
		}
		return out
	}
	// db is bound (web, unbound, no longer holds a field of bindkit's).
	d, err := w.kube.AppsV1().StatefulSets(w.ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(d.ManagedFields); !slices.Contains(got, fieldManagerNamed+"/"+string(metav1.ManagedFieldsOperationUpdate)) {
		t.Errorf("StatefulSet %s/db managedFields managers %v, want %s (Update)", w.ns, got, fieldManagerNamed)
	}
	mwc, err := w.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, githubbinding.WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(mwc.ManagedFields); !slices.Contains(got, fieldManagerNamed+"/"+string(metav1.ManagedFieldsOperationUpdate)) {
		t.Errorf("MutatingWebhookConfiguration %s managedFields managers %v, want %s (Update)", mwc.Name, got, fieldManagerNamed)
	}
	// A Binding's finalizer (a patch) and its status (the status
	// subresource).
	b, err := w.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(w.ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bindingManagers []string
	for _, f := range b.GetManagedFields() {
		bindingManagers = append(bindingManagers, f.Manager+"/"+string(f.Operation)+"/"+f.Subresource)
	}
	for _, want := range []string{fieldManagerNamed + "/Update/", fieldManagerNamed + "/Update/status"} {
		if !slices.Contains(bindingManagers, want) {
			t.Errorf("GithubBinding %s/db managedFields %v, want %s", w.ns, bindingManagers, want)
		}
	}
	s, err := w.kube.CoreV1().Secrets(systemNamespace).Get(ctx, "webhook-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(s.ManagedFields); !slices.Contains(got, fieldManagerNamed+"/"+string(metav1.ManagedFieldsOperationUpdate)) {
		t.Errorf("Secret %s/webhook-certs managedFields managers %v, want %s (Update)", systemNamespace, got, fieldManagerNamed)
	}
}
