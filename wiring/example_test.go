package wiring_test

import (
	"fmt"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/wiring"
)

// A Binding kind is wired with one call from its Go type and its
// resource; the two constructors it returns are what a process runs
// (sharedmain.Main(name, kind.Controller, kind.Webhook)), and its names
// are what the kind's config/ repeats.
func ExampleNew() {
	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(kind.GVK.Kind, kind.ControllerName)
	fmt.Println(kind.WebhookConfigurationName, kind.WebhookPath)
	// Output:
	// GithubBinding githubbindings
	// githubbindings.bindings.bindkit.dev /githubbindings
}

// New checks what it is given and names every field at fault, in one
// error, at construction.
func ExampleNew_invalid() {
	_, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		WebhookPath:      "githubbindings",
		PatchConcurrency: -1,
		References:       []policy.Reference{{Paths: []string{"spec.secret.name"}, Resource: "secrets"}},
	})
	fmt.Println(err)
	// Output:
	// wiring: GithubBinding (githubbindings.bindings.bindkit.dev): Options.WebhookPath "githubbindings": must be an absolute URL path, like /envbindings
	// policy: AuthorityOptions.References[0]: Verb: required, e.g. get
	// Options.PatchConcurrency -1: must not be negative
}

// The admission policies a kind keeps on its own Bindings, as its
// config/ installs them: the authority policy (a Binding reaches no
// further than its author may), the namespace guard, and the record of
// who asked.
func ExampleKind_AdmissionPolicies() {
	kind, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	objects, err := kind.AdmissionPolicies()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objects {
		fmt.Println(o.GetObjectKind().GroupVersionKind().Kind)
	}
	// Output:
	// ValidatingAdmissionPolicy
	// ValidatingAdmissionPolicyBinding
	// ValidatingAdmissionPolicy
	// ValidatingAdmissionPolicyBinding
	// MutatingAdmissionPolicy
	// MutatingAdmissionPolicyBinding
}
