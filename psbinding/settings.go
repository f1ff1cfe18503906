package psbinding

import (
	"cmp"
	"context"
	"slices"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
)

// Settings are what both paths of one Binding kind, the BaseReconciler
// and the AdmissionReconciler, must agree on; each embeds them, so one
// value (wiring.New builds it from wiring.Options) configures both. Every
// zero field takes the default its comment names.
type Settings struct {
	// WithContext, if set, prepares the context Do and Undo run in: once
	// per reconcile, once per Binding per admission request. Its error is
	// reported in the Ready condition (reason ContextFailed) and denies an
	// admission request; its panic is contained like Do's
	// (ReasonBindingPanicked).
	WithContext BindableContext
	// Shapes finds the pod template of each subject kind; the zero value
	// knows the built-in shapes.
	Shapes duck.Shapes
	// SelectorMode chooses which namespaces Bindings act in: in
	// ExclusionMode, the default, every namespace but those labelled
	// ExcludeLabel=true; in InclusionMode only those labelled
	// IncludeLabel=true.
	SelectorMode SelectorMode
	// FieldManager names the controller in the managedFields of what it
	// writes (subject patches, finalizers, status, the webhook
	// configuration); the webhook recognises the reconciler's own patches
	// by it (AdmissionConfig.CallOnOwnPatches). Empty means the field
	// manager of the context (controller.WithFieldManager:
	// injection/sharedmain's component name), else DefaultFieldManager.
	FieldManager string
	// ExcludedNamespaces are namespaces Bindings never act in, whatever
	// their labels, on either path. Nil means KubeNamespaces, where the
	// webhook is not called by default, plus, for the AdmissionReconciler,
	// its SystemNamespace (and no KubeNamespaces when CallInKubeNamespaces
	// is set); an empty, non-nil slice excludes none but the
	// AdmissionReconciler's SystemNamespace, which is never mutated.
	// Package wiring sets the system namespace and, unless the webhook may
	// be called there, KubeNamespaces (wiring.ExcludedNamespaces).
	ExcludedNamespaces []string
	// Rollout, if set, paces every Binding's change through its subjects
	// (RolloutPolicy); a Binding's rollout annotations override it. Nil,
	// the default, patches every subject at once.
	Rollout *RolloutPolicy
	// Validate, if set, says whether a Binding can be applied, with an
	// error naming the field when it cannot: such a Binding is not
	// published (its StatusPublisher is not called, so what it published
	// last stays), binds and unbinds nothing (Ready False, reason
	// ReasonBindingInvalid), and admission leaves it out. Its panic is
	// contained like Do's. wiring.New sets it for a declarative kind
	// (declarative.Spec.Validate).
	Validate func(Bindable) error
}

// ReasonBindingInvalid is the Ready reason of a Binding that Settings.Validate
// refuses: nothing of it reaches a subject.
const ReasonBindingInvalid = "BindingInvalid"

// validate runs Validate on b with its panic contained; nil without one.
func (s *Settings) validate(b Bindable) error {
	if s.Validate == nil {
		return nil
	}
	return containErr(b, "Validate", "", func() error { return s.Validate(b) })
}

// fieldManager is the field manager of every write: FieldManager, else the
// process's (controller.WithFieldManager), else DefaultFieldManager.
func (s *Settings) fieldManager(ctx context.Context) string {
	return cmp.Or(s.FieldManager, controller.FieldManager(ctx), DefaultFieldManager)
}

// excluded reports whether Bindings never act in namespace ns.
func (s *Settings) excluded(ns string) bool {
	if s.ExcludedNamespaces == nil {
		return slices.Contains(KubeNamespaces, ns)
	}
	return slices.Contains(s.ExcludedNamespaces, ns)
}
