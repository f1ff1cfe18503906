package wiring_test

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/tracker"
)

// githubBindings declares the example's CRD to the fakes.
var githubBindings = injectiontest.Resource{
	Kind:       v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.Kind),
	Resource:   v1alpha1.Resource,
	Namespaced: true,
}

func newGithubBinding(ns, name, deployment string) *v1alpha1.GithubBinding {
	return &v1alpha1.GithubBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1},
		Spec: v1alpha1.GithubBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			Secret:  corev1.LocalObjectReference{Name: "gh-token"},
		},
	}
}

func newDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
			},
		},
	}
}

// installedConfig is a webhook configuration as config/ installs it: no
// rules, no CA bundle, a Service client config.
func installedConfig(name string) *admissionregistrationv1.MutatingWebhookConfiguration {
	path := "/"
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "bindkit-system", Name: "webhook", Path: &path}},
		}},
	}
}
