package controller

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/controllerruntime/crtest"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"

	bindingsv1alpha1 "github.com/bindkit/bindkit/controllerruntime/examples/githubbinding/api/v1alpha1"
)

// The GithubBinding kind inside a Manager, as cmd/main.go runs it, on the
// suite's control plane: crtest.Start serves its webhook from the test
// process (the configuration of config/bindkit/githubbinding_webhook.yaml pointed
// at it) and returns once a GithubBinding can be written.
var _ = Describe("GithubBinding", Ordered, func() {
	var namespace string

	BeforeAll(func() {
		kind, err := NewGithubBinding()
		Expect(err).NotTo(HaveOccurred())
		mgr, err := crtest.Start(ctx, cfg, crtest.Options{
			Kinds:                 []*wiring.Kind{kind},
			WebhookConfigurations: []string{filepath.Join("..", "..", "config", "bindkit", "githubbinding_webhook.yaml")},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "githubbinding-"}}
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())
		namespace = ns.Name
		Expect(k8sClient.Create(ctx, deploymentGithubBinding(namespace, "existing"))).To(Succeed())
		Expect(k8sClient.Create(ctx, bindingsv1alpha1.Example(namespace, "example", tracker.Reference{
			APIVersion: "apps/v1", Kind: "Deployment",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"githubbinding-test": "bound"}},
		}))).To(Succeed())
	})

	It("binds a Deployment that was there before it (the reconciler)", func() {
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "existing"}, d)).To(Succeed())
			g.Expect(mountsToken(d)).To(BeTrue())
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
	})

	It("binds a Deployment created after it (the webhook)", func() {
		// The webhook configuration selects the namespace once the leader
		// has seen the GithubBinding: dry-run creates until one comes back bound.
		Eventually(func(g Gomega) {
			d := deploymentGithubBinding(namespace, "new")
			g.Expect(k8sClient.Create(ctx, d, client.DryRunAll)).To(Succeed())
			g.Expect(mountsToken(d)).To(BeTrue())
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
	})

	It("unbinds them when it is deleted", func() {
		Expect(k8sClient.Delete(ctx, &bindingsv1alpha1.GithubBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "example"}})).To(Succeed())
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "existing"}, d)).To(Succeed())
			g.Expect(mountsToken(d)).To(BeFalse())
		}, time.Minute, 100*time.Millisecond).Should(Succeed())
	})
})

// mountsToken reports whether d's pods mount the GitHub token, as the
// GithubBinding's Do mounts it.
func mountsToken(d *appsv1.Deployment) bool {
	spec := d.Spec.Template.Spec
	return len(spec.Volumes) == 1 && spec.Volumes[0].Name == bindingsv1alpha1.VolumeName &&
		len(spec.Containers[0].VolumeMounts) == 1 && spec.Containers[0].VolumeMounts[0].MountPath == bindingsv1alpha1.MountPath
}

// deploymentGithubBinding is a Deployment the test's GithubBinding selects.
func deploymentGithubBinding(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name, "githubbinding-test": "bound"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "app", Image: "registry.example.com/app:1"},
				}},
			},
		},
	}
}

// TestGithubBindingAdmissionPoliciesInConfig keeps
// config/bindkit/githubbinding_admission_policies.yaml what bindkit programs on GithubBindings
// (the authority policy, which refuses a GithubBinding whose author may not
// patch what it reaches; the namespace guard; the record of who asked), so
// that a cluster installed from config/default is guarded before the
// Manager first runs. After changing NewGithubBinding's options, write it
// again: BINDKIT_UPDATE_MANIFESTS=1 go test ./internal/controller/...
func TestGithubBindingAdmissionPoliciesInConfig(t *testing.T) {
	kind, err := NewGithubBinding()
	if err != nil {
		t.Fatal(err)
	}
	bindingtest.CheckManifests(t, kind, filepath.Join("..", "..", "config", "bindkit", "githubbinding_admission_policies.yaml"))
}
