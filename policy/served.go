package policy

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// MutatingPoliciesServed reports whether the kube-apiserver serves
// MutatingAdmissionPolicy and its binding in admissionregistration.k8s.io/v1.
// A process decides with it, at start-up, whether a declarative kind is
// admitted by policy or falls back to the webhook; an error other than the
// group version being absent is returned, so a flaky discovery is not
// mistaken for "not served".
func MutatingPoliciesServed(d discovery.DiscoveryInterface) (bool, error) {
	resources, err := d.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover admissionregistration.k8s.io/v1: %w", err)
	}
	var policies, bindings bool
	for _, r := range resources.APIResources {
		policies = policies || r.Name == "mutatingadmissionpolicies"
		bindings = bindings || r.Name == "mutatingadmissionpolicybindings"
	}
	return policies && bindings, nil
}
