package controller

import (
	"github.com/bindkit/bindkit/wiring"

	bindingsv1alpha1 "github.com/bindkit/bindkit/controllerruntime/examples/githubbinding/api/v1alpha1"
)

// What bindkit's process needs for GithubBindings, as make manifests writes it
// into config/rbac/role.yaml: the Bindings (watched, patched for their
// finalizer, their status written); the subjects (listed and watched as
// metadata, patched); namespaces (whose labels opt their workloads out);
// the webhook configuration and the admission policies on GithubBindings the
// leader keeps programmed, by name (config/bindkit installs them; create
// cannot be limited by name); events; the reviews of the Manager's secure
// metrics endpoint; and, in the Manager's namespace, the webhook
// certificate's Secret (cert-manager's: its ca.crt becomes the caBundle)
// and bindkit's logging ConfigMap. Grant another subject kind here (get,
// list, watch, patch) to bind it after it exists.
//
// +kubebuilder:rbac:groups=bindings.bindkit.dev,resources=githubbindings,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=bindings.bindkit.dev,resources=githubbindings/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=githubbindings.bindings.bindkit.dev,verbs=list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,resourceNames=authority.githubbindings.bindings.bindkit.dev;namespace-guard.githubbindings.bindings.bindkit.dev,verbs=list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings,resourceNames=requested-by.githubbindings.bindings.bindkit.dev,verbs=list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings;mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets;configmaps,verbs=list;watch

// NewGithubBinding wires the GithubBinding Binding kind: its reconciler, which
// binds the subjects that exist and unbinds them when their Binding goes,
// and its admission controller, which binds subjects as they are created
// or updated through the MutatingWebhookConfiguration
// githubbindings.bindings.bindkit.dev (config/bindkit/githubbinding_webhook.yaml, served at
// /githubbindings on the Manager's webhook server). cmd/main.go runs it
// inside the Manager (controllerruntime.Add); the suite's tests run it the
// same way (crtest.Start).
func NewGithubBinding() (*wiring.Kind, error) {
	return wiring.New[bindingsv1alpha1.GithubBinding](bindingsv1alpha1.GroupVersion.WithResource("githubbindings"), wiring.Options{})
}
