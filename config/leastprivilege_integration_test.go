package config

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/faults"
	"github.com/bindkit/bindkit/test/testenv"
	"github.com/bindkit/bindkit/tracker"
)

// audited is a control plane that logs who asked for what.
var audited = testenv.Shared{Options: testenv.Options{Audit: true}}

const (
	systemNamespace    = "bindkit-system"
	serviceAccount     = "githubbinding-controller"
	serviceAccountUser = "system:serviceaccount:" + systemNamespace + ":" + serviceAccount
	secretVolume       = "github-binding"
)

// unusedOnPurpose are grants of config/ that the walkthrough below does not
// exercise, each with why the controller still needs it. Everything else
// config/ grants must be used, or the test fails: privilege nobody uses is
// privilege to remove.
//
// One rule covers every "list": informers stream their initial list over
// a watch (client-go's WatchListClient), so list is used only when a server
// does not serve streaming lists; a list grant counts as used when the
// watch of the same resource was.
var unusedOnPurpose = map[string]string{
	"cluster admissionregistration.k8s.io/validatingadmissionpolicies update":       "the namespace guard's and the authority policy's specs are restored after an operator's edit; policy's integration test edits the guard, the walkthrough does not",
	"cluster admissionregistration.k8s.io/validatingadmissionpolicybindings update": "the namespace guard's and the authority policy's bindings are restored after an operator's edit; the walkthrough does not edit them",
	"cluster admissionregistration.k8s.io/mutatingadmissionpolicies update":         "the requested-by policy is restored after an operator's edit; the walkthrough does not edit it",
	"cluster admissionregistration.k8s.io/mutatingadmissionpolicybindings update":   "the requested-by policy's binding is restored after an operator's edit; the walkthrough does not edit it",
	"cluster admissionregistration.k8s.io/validatingadmissionpolicies create":       "the authority policy and the namespace guard are created by the leader where config/310-githubbinding-admission-policies.yaml was not applied (or they were deleted); the walkthrough applies it",
	"cluster admissionregistration.k8s.io/validatingadmissionpolicybindings create": "their bindings likewise",
	"cluster admissionregistration.k8s.io/mutatingadmissionpolicies create":         "the requested-by policy likewise",
	"cluster admissionregistration.k8s.io/mutatingadmissionpolicybindings create":   "its binding likewise",
}

// TestControllerRunsUnderConfigRBACWithRealAPIServer applies config/ to the
// real kube-apiserver, runs the example binary as config/'s
// ServiceAccount (a token from the TokenRequest API, no admin credentials,
// leader election on, every other flag at its default) through the
// walkthrough with every subject kind config/ grants plus bare Pods and
// Jobs, scraping its metrics as a ServiceAccount bound to config/'s
// metrics-reader role (and refused to callers without it), and then
// reads the audit log: every request the controller sent
// must have been allowed, and every permission config/ grants must have
// been used (or be listed in unusedOnPurpose with a reason).
func TestControllerRunsUnderConfigRBACWithRealAPIServer(t *testing.T) {
	env := audited.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	repoRoot, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}

	// config/, as kubectl apply -f config/ would install it, but for the
	// webhook's client config (a URL on loopback: no node routes a Service
	// here) and the CRD (installed and waited for).
	if err := env.InstallCRDs(ctx, "300-githubbinding.yaml"); err != nil {
		t.Fatal(err)
	}
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	for _, m := range readManifests(t, ".") {
		switch m.obj.GetKind() {
		case "CustomResourceDefinition", "MutatingWebhookConfiguration":
			continue
		}
		if _, err := apply(ctx, dyn, mapper, m.obj, true); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	kubeconfig := serviceAccountKubeconfig(t, ctx, env, kube)
	binary := filepath.Join(t.TempDir(), "githubbinding-controller")
	if err := demo.BuildController(ctx, repoRoot, binary); err != nil {
		t.Fatal(err)
	}
	ctrl, err := demo.StartController(env, binary, "--kubeconfig="+kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			ctrl.Kill()
		}
	})
	// The webhook's client config points at the port the controller
	// reported: it binds one the kernel picks.
	whc, err := demo.WebhookConfiguration(repoRoot, ctrl.WebhookPort)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, whc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), whc.Name, metav1.DeleteOptions{})
	})
	if err := demo.WaitReady(ctx, kube, ctrl.WebhookPort, 90*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, ctrl.LogTail(30))
	}

	w := &walk{t: t, ctx: ctx, env: env, kube: kube, dyn: dyn, ns: env.CreateNamespace(t, "walk-")}
	// The metrics endpoint is on by default, over HTTPS to scrapers
	// config/'s metrics-reader role is bound to; its address is one the
	// kernel picked, as for every run (demo.StartController).
	w.bindMetricsScraper()
	w.checkMetricsRefused(ctrl.MetricsAddress)
	beforeWalk := w.metricsOf(ctrl.MetricsAddress)
	w.run()
	w.refusedAtAdmission()
	w.checkMetricsAfterWalk(ctrl.MetricsAddress, beforeWalk)
	w.checkFieldManagers()
	w.audit()
	beforeRotation := w.metricsOf(ctrl.MetricsAddress)

	// The CA is lost: the leader creates the Secret again.
	if err := kube.CoreV1().Secrets(systemNamespace).Delete(ctx, "webhook-certs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.poll("certificates Secret re-created", func() (string, error) {
		s, err := kube.CoreV1().Secrets(systemNamespace).Get(ctx, "webhook-certs", metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && len(s.Data) == 0) {
			return "not yet", nil
		}
		return "", err
	})
	w.checkRotationMetrics(ctrl.MetricsAddress, beforeRotation)

	if err := ctrl.Stop(); err != nil {
		t.Errorf("controller: %v\n%s", err, ctrl.LogTail(30))
	}
	stopped = true

	// Removing bindkit runs under the same ServiceAccount.
	uninstall, err := demo.StartController(env, binary, "--kubeconfig="+kubeconfig, "--uninstall")
	if err != nil {
		t.Fatal(err)
	}
	w.poll("--uninstall exits", func() (string, error) {
		if exited, err := uninstall.Exited(); exited {
			if err != nil {
				return "", fmt.Errorf("--uninstall: %w\n%s", err, uninstall.LogTail(30))
			}
			return "", nil
		}
		return "running", nil
	})
	if strings.Contains(ctrl.Log(), "forbidden") {
		t.Errorf("controller log mentions forbidden requests:\n%s", grep(ctrl.Log(), "forbidden"))
	}
	checkPermissions(t, env)
	// --uninstall must leave no record behind.
	w.audit()
}

// audit fails the test with every record on the walk's subjects that is
// not the truth, their content checked with GithubBindings' Do.
func (w *walk) audit() {
	w.t.Helper()
	bindingtest.Audit(w.t, w.env, bindingtest.AuditOptions{Namespace: w.ns, Kinds: []audit.Kind{faults.GithubBindingKind}})
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as
// config/'s ServiceAccount with a token from the TokenRequest API.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context, env *testenv.Environment, kube kubernetes.Interface) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", systemNamespace, serviceAccount, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos[serviceAccount] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: serviceAccount}
	kc.CurrentContext = "testenv"
	path := filepath.Join(t.TempDir(), "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// walk is the walkthrough, with every subject kind.
type walk struct {
	t    *testing.T
	ctx  context.Context
	env  *testenv.Environment
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
	// scraperToken is a token of a ServiceAccount bound to config/'s
	// metrics-reader role, strangerToken of one bound to nothing
	// (bindMetricsScraper).
	scraperToken, strangerToken string
}

func (w *walk) poll(what string, check func() (string, error)) {
	w.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(w.ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		var err error
		last, err = check()
		return last == "" && err == nil, err
	})
	if err != nil {
		var why string
		if forbidden := forbiddenRequests(w.t, w.env); len(forbidden) > 0 {
			why = "\nforbidden requests so far (config/ lacks a permission the controller needs):\n" + strings.Join(forbidden, "\n")
		}
		w.t.Fatalf("%s: %v (last: %s)%s", what, err, last, why)
	}
}

// forbiddenRequests lists the controller's requests the API server refused.
func forbiddenRequests(t *testing.T, env *testenv.Environment) []string {
	t.Helper()
	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events {
		if e.User.Username == serviceAccountUser && e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			out = append(out, e.Verb+" "+e.RequestURI)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (w *walk) binding(name string, subject tracker.Reference) {
	w.t.Helper()
	b := &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "GithubBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec:       v1alpha1.GithubBindingSpec{Subject: subject, Secret: corev1.LocalObjectReference{Name: "gh-token"}},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(w.ns).Create(w.ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("create GithubBinding %s: %v", name, err)
	}
}

func ref(apiVersion, kind, name string) tracker.Reference {
	return tracker.Reference{APIVersion: apiVersion, Kind: kind, Name: name}
}

func template(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pod": name}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
}

func mounted(spec *corev1.PodSpec) bool {
	return slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == secretVolume })
}

// run binds subjects of every kind config/ grants through the reconciler,
// a Deployment, a bare Pod and a Job at admission, reports a Binding to a
// kind nobody serves (an event), and unbinds on deletion.
func (w *walk) run() {
	t, ctx, apps, ns := w.t, w.ctx, w.kube.AppsV1(), w.ns
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "x"}}
	for name, create := range map[string]func() error{
		"deployment": func() error {
			_, err := apps.Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "web"}}, Template: template("web")}}, metav1.CreateOptions{})
			return err
		},
		"statefulset": func() error {
			_, err := apps.StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
				Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "db"}}, Template: template("db")}}, metav1.CreateOptions{})
			return err
		},
		"daemonset": func() error {
			_, err := apps.DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "agent"}}, Template: template("agent")}}, metav1.CreateOptions{})
			return err
		},
		"replicaset": func() error {
			_, err := apps.ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"},
				Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "rs"}}, Template: template("rs")}}, metav1.CreateOptions{})
			return err
		},
		"cronjob": func() error {
			tmpl := template("nightly")
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			_, err := w.kube.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
				Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if _, err := w.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gh-token"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.binding("web", ref("apps/v1", "Deployment", "web"))
	w.binding("db", ref("apps/v1", "StatefulSet", "db"))
	w.binding("agent", ref("apps/v1", "DaemonSet", "agent"))
	w.binding("rs", ref("apps/v1", "ReplicaSet", "rs"))
	w.binding("nightly", ref("batch/v1", "CronJob", "nightly"))
	w.binding("later", tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Selector: selector})
	w.binding("pod", ref("v1", "Pod", "single"))
	w.binding("job", ref("batch/v1", "Job", "once"))
	// Names a kind no server serves: not Ready, with a Warning event.
	w.binding("elsewhere", ref("nowhere.example.com/v1", "Ghost", "x"))

	bound := map[string]func() (*corev1.PodSpec, error){
		"deployment web": func() (*corev1.PodSpec, error) {
			d, err := apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			return &d.Spec.Template.Spec, err
		},
		"statefulset db": func() (*corev1.PodSpec, error) {
			d, err := apps.StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
			return &d.Spec.Template.Spec, err
		},
		"daemonset agent": func() (*corev1.PodSpec, error) {
			d, err := apps.DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			return &d.Spec.Template.Spec, err
		},
		"replicaset rs": func() (*corev1.PodSpec, error) {
			d, err := apps.ReplicaSets(ns).Get(ctx, "rs", metav1.GetOptions{})
			return &d.Spec.Template.Spec, err
		},
		"cronjob nightly": func() (*corev1.PodSpec, error) {
			d, err := w.kube.BatchV1().CronJobs(ns).Get(ctx, "nightly", metav1.GetOptions{})
			return &d.Spec.JobTemplate.Spec.Template.Spec, err
		},
	}
	for what, get := range bound {
		w.poll(what+" bound by the reconciler", func() (string, error) {
			spec, err := get()
			if err != nil || !mounted(spec) {
				return "not bound", err
			}
			return "", nil
		})
	}

	// Admission: a Deployment, a bare Pod and a Job are bound as created,
	// once the webhook's configuration names each kind (programmed from
	// the Bindings, a kind at a time as they are indexed): each is tried
	// with a server-side dry run first.
	newPod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "single"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	}
	newJob := func() *batchv1.Job {
		jobTemplate := template("once")
		jobTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "once"}, Spec: batchv1.JobSpec{Template: jobTemplate}}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	w.poll("admission in force for Deployments, Pods and Jobs", func() (string, error) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"pod": "x"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "x"}}, Template: template("x")}}
		got, err := apps.Deployments(ns).Create(ctx, d, dryRun)
		if err != nil || !mounted(&got.Spec.Template.Spec) {
			return "Deployment not mutated yet", err
		}
		pod, err := w.kube.CoreV1().Pods(ns).Create(ctx, newPod(), dryRun)
		if err != nil || !mounted(&pod.Spec) {
			return "Pod not mutated yet", err
		}
		job, err := w.kube.BatchV1().Jobs(ns).Create(ctx, newJob(), dryRun)
		if err != nil || !mounted(&job.Spec.Template.Spec) {
			return "Job not mutated yet", err
		}
		return "", nil
	})
	pod, err := w.kube.CoreV1().Pods(ns).Create(ctx, newPod(), metav1.CreateOptions{})
	if err != nil || !mounted(&pod.Spec) {
		t.Errorf("bare Pod not bound at admission: %v", err)
	}
	job, err := w.kube.BatchV1().Jobs(ns).Create(ctx, newJob(), metav1.CreateOptions{})
	if err != nil || !mounted(&job.Spec.Template.Spec) {
		t.Errorf("Job not bound at admission: %v", err)
	}

	w.poll("refusal recorded as a Warning event", func() (string, error) {
		events, err := w.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "elsewhere" && e.Type == corev1.EventTypeWarning {
				return "", nil
			}
		}
		return "no event yet", nil
	})

	// Deleting a Binding unbinds its subject and releases it.
	if err := w.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.poll("deployment web unbound", func() (string, error) {
		spec, err := bound["deployment web"]()
		if err != nil || mounted(spec) {
			return "still bound", err
		}
		return "", nil
	})
	w.poll("binding web released", func() (string, error) {
		_, err := w.dyn.Resource(v1alpha1.GroupVersionResource()).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "still there", err
	})
}

// grant is one permission: where (a Role's namespace or "cluster"), the
// group/resource (with /subresource), and the verb.
func grantKey(scope, group, resource, verb string) string {
	return scope + " " + group + "/" + resource + " " + verb
}

// checkPermissions compares what the controller sent, from the audit log,
// with what config/ grants.
func checkPermissions(t *testing.T, env *testenv.Environment) {
	t.Helper()
	granted := map[string]bool{}
	var roleNamespace string
	for _, m := range readManifests(t, ".") {
		scope := ""
		if aggregated(m.obj) {
			continue // a role for users, not the controller's
		}
		switch m.obj.GetKind() {
		case "ClusterRole":
			scope = "cluster"
		case "Role":
			scope, roleNamespace = m.obj.GetNamespace(), m.obj.GetNamespace()
		default:
			continue
		}
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						granted[grantKey(scope, g, res, v)] = true
					}
				}
			}
		}
	}

	events, err := env.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	forbidden := forbiddenRequests(t, env)
	for _, e := range events {
		if e.User.Username != serviceAccountUser || e.ObjectRef == nil {
			continue
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		// A request in the Role's namespace may be granted by either role.
		keys := []string{grantKey("cluster", e.ObjectRef.APIGroup, resource, e.Verb)}
		if e.ObjectRef.Namespace == roleNamespace {
			keys = append(keys, grantKey(roleNamespace, e.ObjectRef.APIGroup, resource, e.Verb))
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			continue
		}
		for _, k := range keys {
			if granted[k] {
				used[k] = true
			}
		}
	}
	if len(forbidden) > 0 {
		t.Errorf("the controller needs permissions config/ does not grant; forbidden requests:\n%s", strings.Join(forbidden, "\n"))
	}
	var unused []string
	for k := range granted {
		if rest, ok := strings.CutSuffix(k, " list"); ok && used[rest+" watch"] {
			continue
		}
		if used[k] {
			if _, ok := unusedOnPurpose[k]; ok {
				t.Logf("%q is listed as unused on purpose but was used; the list can shrink", k)
			}
			continue
		}
		if _, ok := unusedOnPurpose[k]; !ok {
			unused = append(unused, k)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("config/ grants permissions the controller never used (remove them, or say why in unusedOnPurpose):\n%s", strings.Join(unused, "\n"))
	}
}

func grep(log, word string) string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out[:min(len(out), 20)], "\n")
}
