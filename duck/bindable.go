package duck

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/tracker"
)

// Bindable is the contract of a Binding resource as the framework sees it:
// a Kubernetes object that names its subject and reports its status.
type Bindable interface {
	metav1.Object
	runtime.Object

	// GetSubject returns the workloads the Binding applies to.
	GetSubject() tracker.Reference
	// GetBindingStatus returns the Binding's status for the framework to
	// update; changes made through it are changes to the Binding.
	GetBindingStatus() BindableStatus
}

// BindableStatus is the part of a Binding's status the framework manages.
type BindableStatus interface {
	// InitializeConditions sets every condition the framework manages that
	// is not set yet to Unknown, leaving set ones alone.
	InitializeConditions()
	// MarkBindingAvailable records that the Binding applies to its subject.
	MarkBindingAvailable()
	// MarkBindingUnavailable records why the Binding does not apply. reason
	// is CamelCase, as metav1.Condition requires.
	MarkBindingUnavailable(reason, message string)
	// SetObservedGeneration records the Binding generation the status
	// describes.
	SetObservedGeneration(generation int64)
	// GetConditions returns the conditions; callers must not change them.
	GetConditions() []metav1.Condition
}

// Condition types and reasons that Status sets.
const (
	// ConditionReady is True when the Binding is fully applied.
	ConditionReady = "Ready"
	// ConditionBindingAvailable is True when the Binding applies to its
	// subject.
	ConditionBindingAvailable = "BindingAvailable"

	// ReasonInitializing is the reason of a condition not yet decided.
	ReasonInitializing = "Initializing"
	// ReasonBindingAvailable is the reason of a True condition set by
	// MarkBindingAvailable.
	ReasonBindingAvailable = "BindingAvailable"
	// ReasonBindingUnavailable is the reason MarkBindingUnavailable uses
	// when given none.
	ReasonBindingUnavailable = "BindingUnavailable"
)

// Status implements BindableStatus. Embed it in a Binding's status:
//
//	type MyBindingStatus struct {
//		duck.Status `json:",inline"`
//		// fields of your own
//	}
//
// Ready mirrors BindingAvailable. Conditions set after SetObservedGeneration
// carry that generation, so call it first in a reconcile.
//
// Its markers give a CRD generated from the Binding's Go type
// (controller-gen) the schema of conditions keyed by type.
type Status struct {
	// ObservedGeneration is the generation of the Binding the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the latest observations of the Binding's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Rollout is the progress of the Binding's change through its
	// subjects, when a rollout policy paces it (psbinding.RolloutPolicy).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// Plan is what resuming the Binding would do to its subjects, while
	// it is paused (psbinding.RolloutPausedAnnotation).
	// +optional
	Plan *PlanStatus `json:"plan,omitempty"`
}

// RolloutStatus is how far a Binding's generation has reached its
// subjects under a rollout policy.
type RolloutStatus struct {
	// Generation is the Binding generation being rolled out.
	Generation int64 `json:"generation"`
	// Updated counts the subjects that carry it and have rolled out.
	Updated int `json:"updated"`
	// Total counts the subjects the Binding selects.
	Total int `json:"total"`
	// Wave counts the waves started for Generation, the current one
	// included.
	Wave int `json:"wave"`
	// Changing are the subjects patched and not yet rolled out, with when
	// each was patched (its deadline runs from then).
	// +optional
	// +listType=map
	// +listMapKey=name
	Changing []ChangingSubject `json:"changing,omitempty"`
	// Halted names the subjects halted: when one failed, every subject
	// still changing to Generation (rolled back when the policy says so);
	// while it is set for Generation, no further subject is patched. A new generation (a fixed
	// Binding) resumes the rollout.
	// +optional
	Halted []string `json:"halted,omitempty"`
	// Reasons says why the rollout halted: each subject that failed, and
	// how (the others of Halted were halted with their wave).
	// +optional
	// +listType=map
	// +listMapKey=name
	Reasons []SubjectReason `json:"reasons,omitempty"`
	// Waiting names (the first MaxWaiting, sorted) the subjects the
	// Binding selects that do not carry Generation and are not changing:
	// those the rollout has not reached, and those created or updated
	// while it was halted, which admission left without the Binding.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Waiting []string `json:"waiting,omitempty"`
	// Paused: the rollout is paused (psbinding.RolloutPausedAnnotation):
	// no wave starts, the waves in flight are watched to their end, and
	// admission gives a subject that does not carry Generation nothing.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// UndoneFrom, when set, is the Binding's generation being undone: the
	// rollout restores Generation, the last generation that rolled out
	// completely before it (psbinding.RolloutUndoAnnotation).
	// +optional
	UndoneFrom int64 `json:"undoneFrom,omitempty"`
}

// MaxWaiting bounds RolloutStatus.Waiting.
const MaxWaiting = 100

// Complete reports whether the rollout of generation has reached every
// subject: no subject is changing or halted, and every subject selected
// carries it. Admission applies a Binding paced by a rollout policy to a
// subject that does not carry it yet only then.
func (r *RolloutStatus) Complete(generation int64) bool {
	return r != nil && r.Generation == generation && len(r.Changing) == 0 && len(r.Halted) == 0 && r.Updated >= r.Total
}

// SubjectReason is why one subject of a rollout failed.
type SubjectReason struct {
	// Name is the subject's name, in the Binding's namespace.
	Name string `json:"name"`
	// Reason is how it failed: "ProgressDeadlineExceeded", "not rolled
	// out within 10m0s", ...
	Reason string `json:"reason"`
}

// ChangingSubject is a subject of a rollout patched and not yet rolled
// out.
type ChangingSubject struct {
	// Name is the subject's name, in the Binding's namespace.
	Name string `json:"name"`
	// Since is when its pod template was patched.
	Since metav1.Time `json:"since"`
	// Generation is the Binding generation it was patched to.
	Generation int64 `json:"generation"`
}

// RolloutRecorder is a BindableStatus that can record a rollout's
// progress, as Status does; a rollout policy needs it.
type RolloutRecorder interface {
	// GetRollout returns the recorded progress, nil when none.
	GetRollout() *RolloutStatus
	// SetRollout records progress; nil clears it.
	SetRollout(*RolloutStatus)
}

var (
	_ BindableStatus  = (*Status)(nil)
	_ RolloutRecorder = (*Status)(nil)
)

// GetRollout implements RolloutRecorder.
func (s *Status) GetRollout() *RolloutStatus { return s.Rollout }

// SetRollout implements RolloutRecorder.
func (s *Status) SetRollout(r *RolloutStatus) { s.Rollout = r }

// InitializeConditions implements BindableStatus.
func (s *Status) InitializeConditions() {
	for _, t := range []string{ConditionBindingAvailable, ConditionReady} {
		if meta.FindStatusCondition(s.Conditions, t) == nil {
			s.set(t, metav1.ConditionUnknown, ReasonInitializing, "")
		}
	}
}

// MarkBindingAvailable implements BindableStatus.
func (s *Status) MarkBindingAvailable() {
	s.set(ConditionBindingAvailable, metav1.ConditionTrue, ReasonBindingAvailable, "")
	s.set(ConditionReady, metav1.ConditionTrue, ReasonBindingAvailable, "")
}

// MarkBindingUnavailable implements BindableStatus.
// An empty reason becomes ReasonBindingUnavailable.
func (s *Status) MarkBindingUnavailable(reason, message string) {
	if reason == "" {
		reason = ReasonBindingUnavailable
	}
	s.set(ConditionBindingAvailable, metav1.ConditionFalse, reason, message)
	s.set(ConditionReady, metav1.ConditionFalse, reason, message)
}

// SetObservedGeneration implements BindableStatus.
func (s *Status) SetObservedGeneration(generation int64) { s.ObservedGeneration = generation }

// GetConditions implements BindableStatus.
func (s *Status) GetConditions() []metav1.Condition { return s.Conditions }

// GetCondition returns the condition of type t, or nil when it is not set.
func (s *Status) GetCondition(t string) *metav1.Condition {
	return meta.FindStatusCondition(s.Conditions, t)
}

// IsReady reports whether the Ready condition is True and describes the
// current ObservedGeneration.
func (s *Status) IsReady() bool {
	c := s.GetCondition(ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.ObservedGeneration
}

// set changes one condition; meta.SetStatusCondition moves
// LastTransitionTime only when the status changes.
func (s *Status) set(t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type:               t,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.ObservedGeneration,
	})
}

// DeepCopyInto copies s into out; out shares no memory with s.
func (s *Status) DeepCopyInto(out *Status) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	out.Rollout = s.Rollout.DeepCopy()
	out.Plan = s.Plan.DeepCopy()
}

// DeepCopy returns a copy of r that shares no memory with it, or nil for
// nil.
func (r *RolloutStatus) DeepCopy() *RolloutStatus {
	if r == nil {
		return nil
	}
	c := *r
	c.Changing = slices.Clone(r.Changing) // Since holds no pointer but its time.Time's location, shared read-only
	c.Halted = slices.Clone(r.Halted)
	c.Reasons = slices.Clone(r.Reasons)
	c.Waiting = slices.Clone(r.Waiting)
	return &c
}

// DeepCopy returns a copy of s that shares no memory with it, or nil for nil.
func (s *Status) DeepCopy() *Status {
	if s == nil {
		return nil
	}
	out := new(Status)
	s.DeepCopyInto(out)
	return out
}
