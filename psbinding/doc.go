// Package psbinding makes PodSpec-able Bindings take effect: a Binding
// author's Do and Undo run on every subject a Binding names, by the
// admission controller when a subject is created or updated, and by the
// BaseReconciler for subjects that already exist.
//
// A Binding type implements Bindable: duck.Bindable (its subject reference
// and status) plus Do and Undo on a *duck.WithPod, the subject's pod
// template whatever the subject's kind. Both must be idempotent.
//
// # What the framework guarantees
//
//   - Namespaces. A namespaced Binding acts only in its own namespace, on
//     both paths, whatever its CRD allows: a subject reference that names
//     another namespace is refused (Ready False, reason
//     SubjectOutsideNamespace, the message naming both namespaces), is
//     never filed in the admission index and adds nothing to the webhook
//     configuration. An empty subject namespace means the Binding's own.
//     Cluster-scoped Binding kinds are refused the same way.
//   - Opt-out. A subject labelled ExcludeLabel=true, or in a namespace so
//     labelled, is never patched by either path (in InclusionMode, only
//     namespaces labelled IncludeLabel=true are acted in). A subject bound
//     before it was excluded is left as it is, bound, even when its Binding
//     is deleted: excluded means untouched. Remove the label to let the
//     Binding manage it again.
//   - Undo only what was bound. Both paths record, in the subject's
//     duck.BoundAnnotation, which Bindings bound it and at which generation.
//     A Binding unbinds only subjects that record it, so two Bindings that
//     write the same field over disjoint selectors never undo each other,
//     and a Binding whose reference changed (name, selector or kind), or
//     that was deleted while the controller was down, still unbinds what it
//     bound (the kinds it bound are recorded on the Binding,
//     SubjectKindsAnnotation).
//   - No pod template, no patch. A subject whose kind's shape finds no pod
//     template (a custom kind that keeps it elsewhere, or none) is never
//     patched: the Binding says so (reason SubjectHasNoPodTemplate, naming
//     the kind and the path) and admission lets the subject through
//     unchanged.
//   - Containment. A panic of the author's code (Do, Undo, WithContext, a
//     SubResourcesReconciler) never ends the process: it is a *PanicError,
//     the Binding's Ready condition (reason ReasonBindingPanicked, naming
//     the subject and the value) and a retry with backoff; the Binding's
//     other subjects are still bound and admission refuses only the object
//     it panicked on. Do, Undo and the bound record run in one binding
//     step, the same on both paths, which contains them.
//   - Private copies. Do, Undo and WithContext never receive an object
//     another reader sees: admission copies each Binding it applies (the
//     index's are the informer's), once per request, after the index
//     lookup; the reconciler's binding step copies for each subject, and
//     for each companion. A Do that changes its Binding changes only its
//     copy (bindingtest.CheckContract reports it).
//   - The API server's words. A subject patch refused with the subject
//     unchanged quotes the kube-apiserver (bounded), and is reported as
//     ReasonDoNotIdempotent or ReasonUndoNotRestoring when a second run of
//     Do or Undo shows why.
//   - Paced change, when asked. Under a RolloutPolicy (Settings.Rollout,
//     or a Binding's rollout annotations) a Binding's change reaches its
//     subjects in waves of at most MaxChanging subjects not yet rolled out
//     (RolledOut), halts on one that does not roll out in time (Ready
//     False, ReasonRolloutHalted, naming it), rolls the wave back when the
//     policy says so and holds it there (HeldAnnotation), and records its
//     progress in the status (duck.RolloutStatus). Without one, every
//     subject is patched at once.
//   - An operator's controls. RolloutPausedAnnotation pauses a rollout
//     after the wave in flight; a Binding created or edited paused
//     changes no subject, admission gives it to no subject that lacks it,
//     and its status publishes the plan, what resuming would do (the
//     waves, and each subject's change computed with the kind's own
//     binding step; duck.PlanStatus). RolloutUndoAnnotation brings the
//     subjects back, in waves, to the newest generation whose rollout
//     completed (RolloutHistoryAnnotation records its spec). Each state
//     has a Ready reason (ReasonRolloutPaused, ReasonUndoingRollout,
//     ReasonRolloutUndone, ReasonUndoUnavailable), events, and metrics
//     (RolloutControlObserver). kubectl-bindkit sets and reads them.
//
// Settings holds what both paths of a kind must agree on (WithContext,
// Shapes, SelectorMode, FieldManager, ExcludedNamespaces, Rollout); BaseReconciler
// and AdmissionConfig embed it, and package wiring builds one value for
// both.
//
// # The reconcile path
//
// BaseReconciler reconciles one Binding kind. It adds a finalizer, calls
// WithContext once, resolves the subject's resource through a RESTMapper,
// tracks the subject (by name or selector) and the Binding's namespace so
// that their changes reconcile the Binding again, runs the
// SubResourcesReconciler, then binds the selected subjects that do not yet
// record the Binding at its generation and unbinds those that record it but
// are no longer selected. Subjects come from the process's slim metadata
// cache; only a subject that needs work is read in full, so a reconcile of
// a Binding in force sends no request; many subjects of a selector are
// read with paged LISTs, and through a duck.RawLister (the dynamic client
// injection.New makes) each listed subject's pod template is decoded
// straight from its JSON, or, for the built-in workload kinds, read from
// the typed object a protobuf page brought (duck.Shape.FromObject). Each patch is guarded by the values
// it depends on (duck.Guard), not by the subject's resourceVersion, so it
// goes through while other clients edit other fields, and is recomputed
// from a fresh read when someone changed what it would overwrite. The
// Ready condition carries a reason for every outcome; status is written
// only when it changed, against a fresh read when the cache was behind;
// conflicts are retried quietly, and Warning events are kept for what an
// operator must act on. A deleted Binding is unbound from every subject,
// then its sub-resources are deleted, then its finalizer goes. Kinds whose
// pod template cannot change in place (bare Pods, Jobs) are bound at
// admission only: the reconciler never lists them, and the condition says
// so. NewReconcilerImpl wires a BaseReconciler from a context built by
// package injection; its fields can also be set one by one, as in knative's
// walkthrough.
//
// # The admission path
//
// AdmissionReconciler lists all Bindings on every change and builds an
// immutable index of them, swapped in atomically: by exact subject (group,
// kind, namespace, name) and by label selector, the selectors of a
// namespace filed under one key=value pair they require, so a lookup checks
// only the selectors the object's labels could satisfy. Admit lets through
// untouched every request no Binding can concern (other operations,
// subresources, kinds or namespaces without Bindings) before decoding the
// object, and otherwise answers with the JSON patch of Do (or Undo, for a
// Binding being deleted) applied in the order of the Bindings'
// namespace/name, so the same inputs always give the same patch and the
// webhook never fights the reconciler.
//
// Admit decodes a matched object as the kube-apiserver does (field names
// match case-sensitively; a field given twice is a 400) and only after a
// scan that allocates nothing: an object beyond one of the webhook's
// ObjectLimits (containers, volumes, env and volumeMounts per container,
// nesting depth) is refused with a 413 that names the limit and its flag,
// and the object's estimated decoded size is reserved from the webhook's
// memory budget before decoding (webhook.Reserve; no room is answered 429,
// which the kube-apiserver retries). A patch larger than MaxPatchBytes is a
// 413 naming the Bindings. Do and Undo never see managedFields.
//
// A subject whose shape finds no pod template at its path (the field is
// absent or null, duck.ErrNoPodTemplate) is never patched: a template added
// where the kind's schema keeps none would be pruned, and binding it would
// never settle. Admit allows it unchanged, with a warning that names the
// Bindings, the kind and the path and says to declare the kind's shape
// (duck.Shapes.With and duck.TemplateAt). A template that is present but
// not an object is a 400.
//
// On the leader, the same reconcile
// programs the MutatingWebhookConfiguration: rules for the subjects' main
// resources, the CA bundle (it is the one writer of caBundle, and the
// certificates.Publisher the certificates reconciler waits for), the
// handler path, and namespace and object selectors that let the
// kube-apiserver call the webhook only in the namespaces holding a Binding
// of the kind (never the system namespace, nor KubeNamespaces unless opted
// in), minus those labelled ExcludeLabel, and in inclusion mode only those
// labelled IncludeLabel. It watches the configuration and restores what it
// owns within seconds of an edit, keeping what the administrator owns.
// NewAdmissionController builds it from a context; NewAdmissionReconciler
// from an explicit AdmissionConfig.
package psbinding
