package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/policy"
)

// authorityPrefix is how the authority policies' names start
// (policy.AuthorityName): the rest is the guarded kind's group resource.
const authorityPrefix = "authority."

// Unattributed lists the Bindings with no record of who asked for them
// (policy.RequestedByAnnotation), as "<resource>.<group> namespace/name":
// written before the kube-apiserver recorded their author (before the
// kind's requested-by policy, or where MutatingAdmissionPolicy is not
// served). Their authority was never checked against a user; have their
// author apply them again (a change of spec records the author, and the
// authority policy checks them), or delete them. The Binding kinds are
// those a bindkit process guards (a ValidatingAdmissionPolicy
// "authority.<resource>.<group>", read where the caller may list them)
// and kinds, which callers add (the kinds named by records, say). Sorted.
func Unattributed(ctx context.Context, opts Options, kinds ...schema.GroupResource) ([]string, error) {
	if opts.Dynamic == nil || opts.Mapper == nil {
		return nil, errors.New("audit: Options.Dynamic and Options.Mapper are required")
	}
	guarded, err := guardedKinds(ctx, opts)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, gr := range slices.Compact(slices.SortedFunc(slices.Values(append(guarded, kinds...)), compareGroupResource)) {
		gvr, err := opts.Mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			continue // a kind nobody serves has no Bindings to audit
		}
		list, err := opts.Dynamic.Resource(gvr).Namespace(opts.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: list %s: %w", gr, err)
		}
		for _, b := range list.Items {
			if b.GetAnnotations()[policy.RequestedByAnnotation] == "" {
				out = append(out, gr.String()+" "+b.GetNamespace()+"/"+b.GetName())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// guardedKinds are the Binding kinds whose authority policy is
// programmed; none where the caller may not list policies.
func guardedKinds(ctx context.Context, opts Options) ([]schema.GroupResource, error) {
	vaps := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	list, err := opts.Dynamic.Resource(vaps).List(ctx, metav1.ListOptions{LabelSelector: policy.ManagedByLabel + "=bindkit"})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: list validatingadmissionpolicies: %w", err)
	}
	var out []schema.GroupResource
	for _, p := range list.Items {
		if rest, ok := strings.CutPrefix(p.GetName(), authorityPrefix); ok {
			out = append(out, schema.ParseGroupResource(rest))
		}
	}
	return out, nil
}

func compareGroupResource(a, b schema.GroupResource) int {
	return strings.Compare(a.String(), b.String())
}

// WriteUnattributed prints the Bindings Unattributed found, after a table
// of findings; nothing when there are none.
func WriteUnattributed(w io.Writer, bindings []string) error {
	if len(bindings) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%d Binding(s) with no record of who asked for them (%s): written before the kube-apiserver recorded their author, so their authority was never checked against a user. Have their author apply each again, or delete it:\n  %s\n",
		len(bindings), policy.RequestedByAnnotation, strings.Join(bindings, "\n  "))
	return err
}
