package duck

import "slices"

// Bounds of a PlanStatus: a plan over ten thousand subjects stays a few
// tens of KiB of status, whatever the subjects.
const (
	// MaxPlanRead is how many subjects a plan reads in full to show
	// their change, the first in the order the waves take them; the
	// others are counted (PlanStatus.NotRead).
	MaxPlanRead = 100
	// MaxPlanChanges bounds PlanStatus.Changes: subjects whose change is
	// like no listed one's beyond it are counted (PlanStatus.OtherChanges).
	MaxPlanChanges = 10
	// MaxPlanNames bounds the names a PlanChange lists.
	MaxPlanNames = 100
	// MaxPlanWaves bounds PlanStatus.Waves, and MaxPlanWaveNames the
	// names each lists.
	MaxPlanWaves     = 50
	MaxPlanWaveNames = 20
	// MaxPlanPatchBytes bounds PlanChange.Patch.
	MaxPlanPatchBytes = 2048
)

// PlanStatus is what resuming a paused Binding would do to its subjects,
// computed with the Binding's own Do and Undo on copies of the subjects
// read from the cluster, and the waves its rollout policy would take. It
// is bounded: the first MaxPlanRead subjects are shown in detail, the
// rest are counted.
type PlanStatus struct {
	// Generation is the generation the plan brings the subjects to: the
	// Binding's, or, for an undo, the generation it restores.
	Generation int64 `json:"generation"`
	// UndoneFrom, when set, is the Binding's generation the plan undoes.
	// +optional
	UndoneFrom int64 `json:"undoneFrom,omitempty"`
	// Total counts the subjects the Binding selects that can be bound:
	// not labelled bindings.bindkit.dev/exclude, not being deleted.
	Total int `json:"total"`
	// Unchanged counts those that carry Generation already: recorded at
	// it, or at an earlier generation whose change is Generation's (an
	// edit that changes no template writes nothing to them).
	Unchanged int `json:"unchanged"`
	// Bind counts the subjects the plan binds to Generation (they carry
	// no generation of the Binding, or another one).
	Bind int `json:"bind"`
	// Unbind counts the subjects it unbinds: they carry the Binding but
	// it no longer selects them.
	Unbind int `json:"unbind"`
	// TemplateChanges counts, of Bind and Unbind, the subjects whose pod
	// template the plan changes: the waves take them, and their pods
	// roll. A subject that could not be read counts here. It is written
	// by every bindkit that writes RecordsOnly; a plan without it (an
	// older bindkit's) counts every subject of Bind and Unbind as one.
	// +optional
	TemplateChanges int `json:"templateChanges"`
	// RecordsOnly counts, of Bind and Unbind, the subjects whose pod
	// template stays as it is: only the records bindkit keeps on them
	// change, all at once when the rollout resumes, in no wave and
	// rolling no pod. TemplateChanges + RecordsOnly = Bind + Unbind.
	// +optional
	RecordsOnly int `json:"recordsOnly"`
	// Waves are the waves the rollout policy would take, in order, of
	// the template changes.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Waves []PlanWave `json:"waves,omitempty"`
	// MoreWaves counts the waves beyond MaxPlanWaves.
	// +optional
	MoreWaves int `json:"moreWaves,omitempty"`
	// Changes are the changes of the subjects read, each with the
	// subjects it is the change of.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Changes []PlanChange `json:"changes,omitempty"`
	// OtherChanges counts subjects read whose change is none of Changes
	// (there were more than MaxPlanChanges different ones).
	// +optional
	OtherChanges int `json:"otherChanges,omitempty"`
	// NotRead counts the subjects of the plan not read (beyond
	// MaxPlanRead): their change is not shown.
	// +optional
	NotRead int `json:"notRead,omitempty"`
	// Errors names subjects whose change could not be computed, and why.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Errors []SubjectReason `json:"errors,omitempty"`
}

// PlanWave is one wave of a plan.
type PlanWave struct {
	// Number is the wave's number in the rollout of the generation.
	Number int `json:"number"`
	// Count counts its subjects.
	Count int `json:"count"`
	// Subjects names them (the first MaxPlanWaveNames).
	// +kubebuilder:validation:MaxItems=20
	Subjects []string `json:"subjects"`
}

// PlanChange is one change of a plan and the subjects it is the change of.
type PlanChange struct {
	// Action is "bind" (Do of Generation, after Undo of the generation
	// undone for an undo) or "unbind" (Undo).
	Action string `json:"action"`
	// Count counts the subjects; Subjects names them (the first
	// MaxPlanNames, sorted).
	Count int `json:"count"`
	// +kubebuilder:validation:MaxItems=100
	Subjects []string `json:"subjects"`
	// Patch is the change as a JSON patch (RFC 6902) of the subject's
	// object, its pod template's fields only (the records bindkit keeps
	// aside): applied to each subject as it was read, it gives what the
	// Binding makes of it. "[]" when the change leaves the template as
	// it is. Cut at MaxPlanPatchBytes, with Truncated set.
	Patch string `json:"patch"`
	// Truncated: Patch was cut.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// DeepCopy returns a copy of p that shares no memory with it, or nil for
// nil.
func (p *PlanStatus) DeepCopy() *PlanStatus {
	if p == nil {
		return nil
	}
	c := *p
	c.Waves = slices.Clone(p.Waves)
	for i := range c.Waves {
		c.Waves[i].Subjects = slices.Clone(c.Waves[i].Subjects)
	}
	c.Changes = slices.Clone(p.Changes)
	for i := range c.Changes {
		c.Changes[i].Subjects = slices.Clone(c.Changes[i].Subjects)
	}
	c.Errors = slices.Clone(p.Errors)
	return &c
}

// PlanRecorder is a BindableStatus that can publish a plan, as Status
// does; a paused Binding's plan needs it.
type PlanRecorder interface {
	// GetPlan returns the published plan, nil when none.
	GetPlan() *PlanStatus
	// SetPlan publishes a plan; nil removes it.
	SetPlan(*PlanStatus)
}

var _ PlanRecorder = (*Status)(nil)

// GetPlan implements PlanRecorder.
func (s *Status) GetPlan() *PlanStatus { return s.Plan }

// SetPlan implements PlanRecorder.
func (s *Status) SetPlan(p *PlanStatus) { s.Plan = p }
