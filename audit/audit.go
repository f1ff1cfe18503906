package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

// Problems a Finding reports.
const (
	// ProblemGone: a record names a Binding that does not exist, or that
	// exists under another UID (a Binding re-created with the same name is
	// another Binding). Records die with their Binding; this one did not.
	ProblemGone = "BindingGone"
	// ProblemAhead: the bound record names a generation the Binding has
	// not reached: the record cannot describe what the subject carries.
	ProblemAhead = "GenerationAhead"
	// ProblemContent: the subject records the Binding at a generation
	// whose change it does not carry (Do on it would change it).
	ProblemContent = "ContentDisagrees"
	// ProblemStaleRollback: a rollback record undoes a generation the
	// subject no longer carries; applied, it would undo something else.
	ProblemStaleRollback = "StaleRollback"
	// ProblemStaleHold: a hold of a generation whose rollout is complete
	// at a later one, which would have lifted it.
	ProblemStaleHold = "StaleHold"
	// ProblemUnreadable: a record annotation bindkit cannot read.
	ProblemUnreadable = "UnreadableRecord"
	// ProblemNewerFormat: a record of a Binding that exists, written by a
	// newer bindkit in a format this one does not read
	// (duck.RecordFormat). It is left alone, by this audit too: its
	// finding has no fix; the newer bindkit's audit checks it.
	ProblemNewerFormat = "NewerFormat"
)

// Finding is one record that is not the truth, and how to make it so.
type Finding struct {
	// Subject names the workload: "apps/v1 Deployment ns/name".
	Subject string `json:"subject"`
	// Binding names the Binding the record is about:
	// "<resource>.<group> ns/name", "" for an unreadable annotation.
	Binding string `json:"binding,omitempty"`
	// Annotation is the record annotation at fault.
	Annotation string `json:"annotation"`
	// Problem is one of the Problem constants; Detail says it in words.
	Problem string `json:"problem"`
	Detail  string `json:"detail"`
	// Fix is a JSON merge patch of the subject that makes its records the
	// truth, for every finding of the subject at once (Apply sends it): a
	// record removed, so that the Binding's reconciler, where the Binding
	// exists, binds the subject again; FixCommand is the same as a kubectl
	// command.
	Fix        json.RawMessage `json:"fix"`
	FixCommand string          `json:"fixCommand"`

	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// String formats f on one line.
func (f Finding) String() string {
	s := f.Subject + ": " + f.Problem + ": " + f.Detail
	if f.FixCommand != "" {
		s += "; fix: " + f.FixCommand
	}
	return s
}

// Kind is a Binding kind the audit can check the content of subjects
// for: its resource, and a function that turns one of its Bindings, as
// the API server returns it, into the Bindable whose Do the audit runs.
type Kind struct {
	Resource schema.GroupVersionResource
	Decode   func(*unstructured.Unstructured) (psbinding.Bindable, error)
}

// Options say what to audit. The zero value of each field takes the
// default its comment names; Dynamic and Mapper are required.
type Options struct {
	// Dynamic reads subjects and Bindings.
	Dynamic dynamic.Interface
	// Mapper maps a record's Binding resource to a version, and the
	// subjects' kinds to resources.
	Mapper meta.RESTMapper
	// Namespace limits the audit to one namespace. Default: all.
	Namespace string
	// Subjects are the resources whose objects are audited. Default:
	// DefaultSubjects.
	Subjects []schema.GroupVersionResource
	// Kinds are the Binding kinds whose Do the audit may run to check a
	// subject's content against its record. A declarative kind needs
	// none: its published Spec is read from the Binding's status.
	Kinds []Kind
}

// DefaultSubjects are the built-in workload resources.
func DefaultSubjects() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"}, {Group: "apps", Version: "v1", Resource: "replicasets"},
		{Group: "batch", Version: "v1", Resource: "jobs"}, {Group: "batch", Version: "v1", Resource: "cronjobs"},
		{Version: "v1", Resource: "pods"},
	}
}

// Run reads every subject of opts.Subjects (in opts.Namespace) and reports
// each record that is not the truth: records of Bindings that are gone,
// generations the Binding has not reached, rollback records that no
// longer apply, holds a complete rollout should have lifted, and, where
// the audit can run the Binding's Do (a declarative kind's published Spec,
// or a Kind of opts.Kinds), subjects that record a generation whose
// change they do not carry. Findings are sorted by subject. A subject
// kind the API server does not serve is skipped, and so is an object a
// controller owns (a Deployment's ReplicaSet, a ReplicaSet's Pod): its
// template and the records it copies are its owner's.
func Run(ctx context.Context, opts Options) ([]Finding, error) {
	if opts.Dynamic == nil || opts.Mapper == nil {
		return nil, errors.New("audit: Options.Dynamic and Options.Mapper are required")
	}
	a := &auditor{opts: opts, bindings: map[string]*binding{}}
	subjects := opts.Subjects
	if len(subjects) == 0 {
		subjects = DefaultSubjects()
	}
	for _, gvr := range subjects {
		list, err := opts.Dynamic.Resource(gvr).Namespace(opts.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: list %s: %w", gvr.GroupResource(), err)
		}
		for i := range list.Items {
			if metav1.GetControllerOf(&list.Items[i]) != nil {
				// Its template is its controller's, and so are the records
				// it copied from it (a Deployment's ReplicaSets copy its
				// annotations).
				continue
			}
			if err := a.subject(ctx, gvr, &list.Items[i]); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(a.findings, func(x, y Finding) int {
		return cmp.Or(strings.Compare(x.Subject, y.Subject), strings.Compare(x.Binding, y.Binding), strings.Compare(x.Problem, y.Problem))
	})
	return a.findings, nil
}

// Apply sends f's fix; a finding with none (ProblemNewerFormat alone on
// its subject) sends nothing.
func Apply(ctx context.Context, client dynamic.Interface, f Finding) error {
	if len(f.Fix) == 0 {
		return nil
	}
	_, err := client.Resource(f.gvr).Namespace(f.namespace).Patch(ctx, f.name, "application/merge-patch+json", f.Fix, metav1.PatchOptions{FieldManager: "bindkit-audit"})
	return err
}

// auditor is one Run.
type auditor struct {
	opts     Options
	bindings map[string]*binding // by "<resource>.<group>/<namespace>/<name>"
	findings []Finding
}

// binding is a Binding as the audit read it: nil object when it is gone.
type binding struct {
	obj       *unstructured.Unstructured
	bindable  psbinding.Bindable // for Do, when the audit can run it
	declared  *declarative.Spec
	published int64
	rollout   *duck.RolloutStatus
}

// lookup reads the Binding a record names, once per Run.
func (a *auditor) lookup(ctx context.Context, by duck.BoundBy, ns string) (*binding, error) {
	key := by.Resource.String() + "/" + ns + "/" + by.Name
	if b, ok := a.bindings[key]; ok {
		return b, nil
	}
	b := &binding{}
	a.bindings[key] = b
	gvr, err := a.resourceOf(by.Resource)
	if err != nil {
		return b, nil // a resource nobody serves: the Binding is gone
	}
	obj, err := a.opts.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, by.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: get %s %s/%s: %w", by.Resource, ns, by.Name, err)
	}
	b.obj = obj
	b.published, _, _ = unstructured.NestedInt64(obj.Object, "status", "declaredGeneration")
	if m, ok, _ := unstructured.NestedMap(obj.Object, "status", "declared"); ok && b.published > 0 {
		spec := &declarative.Spec{}
		if js, err := json.Marshal(m); err == nil && json.Unmarshal(js, spec) == nil {
			b.declared = spec
		}
	}
	if m, ok, _ := unstructured.NestedMap(obj.Object, "status", "rollout"); ok {
		ro := &duck.RolloutStatus{}
		if js, err := json.Marshal(m); err == nil && json.Unmarshal(js, ro) == nil {
			b.rollout = ro
		}
	}
	for _, k := range a.opts.Kinds {
		if k.Resource.GroupResource() == by.Resource && k.Decode != nil {
			if b.bindable, err = k.Decode(obj); err != nil {
				return nil, fmt.Errorf("audit: decode %s %s/%s: %w", by.Resource, ns, by.Name, err)
			}
		}
	}
	return b, nil
}

// resourceOf finds a served version of gr.
func (a *auditor) resourceOf(gr schema.GroupResource) (schema.GroupVersionResource, error) {
	return a.opts.Mapper.ResourceFor(gr.WithVersion(""))
}

// Write prints findings to w as format: "table" (the default: one line
// each, the fix after), "json" or "yaml" (a list of Findings). An empty
// table prints "no findings".
func Write(w io.Writer, findings []Finding, format string) error {
	switch format {
	case "", "table":
		if len(findings) == 0 {
			_, err := fmt.Fprintln(w, "no findings: every record is the truth")
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SUBJECT\tBINDING\tPROBLEM\tDETAIL")
		for _, f := range findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Subject, cmp.Or(f.Binding, "-"), f.Problem, f.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		seen := map[string]bool{"": true}
		for _, f := range findings {
			if !seen[f.FixCommand] {
				if len(seen) == 1 {
					fmt.Fprintln(w, "\nFixes (one per subject; bindkit audit -fix applies them):")
				}
				seen[f.FixCommand] = true
				fmt.Fprintln(w, "  "+f.FixCommand)
			}
		}
		return nil
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(orEmpty(findings))
	case "yaml":
		out, err := yaml.Marshal(orEmpty(findings))
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	return fmt.Errorf("audit: output format %q: want table, json or yaml", format)
}

func orEmpty(f []Finding) []Finding {
	if f == nil {
		return []Finding{}
	}
	return f
}
