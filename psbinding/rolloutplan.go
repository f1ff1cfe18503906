package psbinding

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

// The decision of one reconcile of a Binding paced by a rollout policy,
// as a pure function of what the reconcile observed (the Deployment
// controller's way: the numbers from the objects, the writes apart):
// rollout.go observes and applies, this file decides.
//
// Where the state lives. Every paced change of a subject records, in the
// same patch, the Binding (with its UID), the generation, the wave and the
// time (duck.RolloutAnnotation). The Binding's status is a report written
// after each wave; it says which of the recorded changes the leader has
// seen roll out. A recorded change is in flight unless the last report
// says it is done (changeInFlight), so a leader that dies, or loses its lease,
// between a wave's patches and the report leaves nothing behind: whoever
// leads next finds the wave on the subjects themselves.

// rolloutInput is what one reconcile of a paced Binding observed.
type rolloutInput struct {
	generation int64
	policy     RolloutPolicy
	// prev is the newest report of the rollout: this process's last
	// computed one, else the Binding's status; nil if none.
	prev *duck.RolloutStatus
	// changed are the subjects whose records hold a paced change of the
	// Binding that is in flight (changeInFlight), with their live state.
	changed []changedSubject
	// todo is the work the reconcile found, sorted by name.
	todo []work
	// held names the subjects held from generation: a halt of it rolled
	// them back, whether or not its report was written (a leader that
	// dies between a rollback and its report leaves only these records).
	held []string
	// total counts the subjects selected that can be bound; inForce
	// those of them that carry generation (recorded at it, or at an
	// earlier generation whose change is the same), and those of
	// recordsOnly written in this reconcile.
	total, inForce int
	// recordsOnly is the work that changes only bindkit's records (not
	// in todo: applied with no wave, unless paused).
	recordsOnly []work
	now         time.Time
	// quietWait is how much longer the generation must stay unchanged
	// before it is rolled out (RolloutPolicy.Quiet).
	quietWait time.Duration
	// paused: no wave starts (RolloutPausedAnnotation).
	paused bool
	// undoneFrom, when set, is the Binding's generation being undone:
	// generation is the one the undo restores, whose subjects record
	// waves up to restoredWave from its own rollout; the undo's waves
	// are numbered after them.
	undoneFrom   int64
	restoredWave int
}

// changedSubject is a subject with a paced change of the Binding in
// flight, and how its rollout stands now.
type changedSubject struct {
	name   string
	change duck.Change
	// done: its workload reports the change rolled out; failure, why it
	// cannot (ProgressDeadlineExceeded).
	done    bool
	failure string
}

// rolloutPlan is what a reconcile does: the status to report, the wave
// to patch, the subjects to roll back.
type rolloutPlan struct {
	status *duck.RolloutStatus
	// wave is the work to patch now, each marked paced with its wave.
	wave []work
	// rollBack names the subjects to roll back (halted, still changing).
	rollBack []string
	// halted: this reconcile halted the rollout (an event, a metric).
	halted bool
	// done: the rollout is complete; reason and message are empty.
	done            bool
	reason, message string
	retry           time.Duration
}

// changeInFlight reports whether a subject's recorded paced change c is still
// to be seen rolling out, given the last report prev: unless prev reports
// c's wave and does not list the subject as changing, nobody has seen it
// roll out. A leader that dies between a wave's patches and its report
// leaves changes of a wave later than the report's, or of a generation
// the report does not know: those are in flight.
func changeInFlight(prev *duck.RolloutStatus, name string, c duck.Change) bool {
	if prev == nil || c.Generation > prev.Generation || (c.Generation == prev.Generation && c.Wave > prev.Wave) {
		return true
	}
	return slices.ContainsFunc(prev.Changing, func(s duck.ChangingSubject) bool {
		return s.Name == name && s.Generation == c.Generation
	})
}

// decideRollout is the rollout decision: from what in observed, the
// status, and either a halt (with the subjects to roll back), the next
// wave, or a wait. An undo's progress is reported as such.
func decideRollout(in rolloutInput) rolloutPlan {
	p := decideOnce(in)
	if in.undoneFrom > 0 && p.reason == ReasonRollingOut {
		p.reason = ReasonUndoingRollout
	}
	return p
}

func decideOnce(in rolloutInput) rolloutPlan {
	ro := &duck.RolloutStatus{Generation: in.generation, Total: in.total, Paused: in.paused, UndoneFrom: in.undoneFrom}
	if p := in.prev; p != nil && p.Generation == in.generation {
		ro.Wave, ro.Halted, ro.Reasons = p.Wave, slices.Clone(p.Halted), slices.Clone(p.Reasons)
	}
	if in.undoneFrom > 0 {
		// The restored generation's own waves are done: they are not the
		// undo's, whose waves come after them.
		ro.Wave = max(ro.Wave, in.restoredWave)
	}
	var failed []duck.SubjectReason
	stillAtGeneration := 0
	for _, c := range in.changed {
		if c.change.Generation == in.generation {
			ro.Wave = max(ro.Wave, c.change.Wave) // a wave its leader did not report
		}
		failure := c.failure
		if !c.done && failure == "" && in.now.Sub(c.change.Since) > in.policy.Deadline {
			failure = fmt.Sprintf("not rolled out within %v", in.policy.Deadline)
		}
		switch {
		case c.done:
			continue
		case c.change.Generation == in.generation:
			stillAtGeneration++
			if failure != "" {
				failed = append(failed, duck.SubjectReason{Name: c.name, Reason: failure})
			}
		}
		// Changing to a superseded generation: it takes a slot until a
		// wave patches it to this one, and cannot halt this generation.
		ro.Changing = append(ro.Changing, duck.ChangingSubject{Name: c.name, Since: metav1.NewTime(c.change.Since), Generation: c.change.Generation})
	}
	slices.SortFunc(ro.Changing, func(a, b duck.ChangingSubject) int { return strings.Compare(a.Name, b.Name) })
	ro.Updated = max(0, in.inForce-stillAtGeneration)
	ro.Waiting = waiting(in.todo, ro.Changing)

	switch {
	case (len(failed) > 0 || len(in.held) > 0) && len(ro.Halted) == 0:
		return halt(in, ro, failed)
	case len(ro.Halted) > 0:
		// Halted at this generation: nothing more until the Binding
		// changes; a rollback that failed is tried again.
		return rolloutPlan{status: ro, rollBack: toRollBack(in.policy, ro), reason: ReasonRolloutHalted, message: haltMessage(in.policy, ro)}
	case in.paused:
		return pausedPlan(in, ro)
	case in.quietWait > 0 && len(in.todo) > 0:
		return rolloutPlan{status: ro, reason: ReasonRollingOut, retry: in.quietWait,
			message: fmt.Sprintf("generation %d: waiting %v for edits to settle before rolling out", in.generation, in.quietWait.Round(time.Millisecond))}
	}
	return nextWave(in, ro)
}

// halt halts the rollout as a whole: every subject still changing to the
// generation is halted (and rolled back, under a policy that says so) with
// the ones that failed, not only those whose failure showed first (their
// Deployments report ProgressDeadlineExceeded one at a time).
func halt(in rolloutInput, ro *duck.RolloutStatus, failed []duck.SubjectReason) rolloutPlan {
	for _, c := range ro.Changing {
		if c.Generation == in.generation {
			ro.Halted = append(ro.Halted, c.Name)
		}
	}
	ro.Halted = append(ro.Halted, in.held...)
	slices.Sort(ro.Halted)
	ro.Halted = slices.Compact(ro.Halted)
	slices.SortFunc(failed, func(a, b duck.SubjectReason) int { return strings.Compare(a.Name, b.Name) })
	ro.Reasons = failed
	return rolloutPlan{status: ro, rollBack: toRollBack(in.policy, ro), halted: true, reason: ReasonRolloutHalted, message: haltMessage(in.policy, ro)}
}

// toRollBack names the halted subjects still changing to the halted
// generation, when the policy rolls back.
func toRollBack(policy RolloutPolicy, ro *duck.RolloutStatus) []string {
	if !policy.Rollback {
		return nil
	}
	var out []string
	for _, c := range ro.Changing {
		if c.Generation == ro.Generation && slices.Contains(ro.Halted, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// haltMessage is the Ready message of a halted rollout: every halted
// subject with why, and, under a policy that rolls back, those rolled
// back. It depends on the status only, so every reconcile after the halt
// writes the same one.
func haltMessage(policy RolloutPolicy, ro *duck.RolloutStatus) string {
	why := make([]string, 0, len(ro.Halted))
	for _, name := range ro.Halted {
		reason := "halted with its wave"
		if i := slices.IndexFunc(ro.Reasons, func(r duck.SubjectReason) bool { return r.Name == name }); i >= 0 {
			reason = ro.Reasons[i].Reason
		}
		why = append(why, name+": "+reason)
	}
	msg := fmt.Sprintf("rollout of generation %d halted at wave %d: %s", ro.Generation, ro.Wave, strings.Join(why, "; "))
	if policy.Rollback {
		var back []string
		for _, name := range ro.Halted {
			if !slices.ContainsFunc(ro.Changing, func(c duck.ChangingSubject) bool { return c.Name == name }) {
				back = append(back, name)
			}
		}
		if len(back) > 0 {
			msg += "; rolled back " + strings.Join(back, ", ")
		}
	}
	return msg
}

// nextWave picks the next wave from todo: at most the policy's
// max-changing subjects changing at once, those changing to a superseded
// generation first (their slots are taken already).
func nextWave(in rolloutInput, ro *duck.RolloutStatus) rolloutPlan {
	changing := func(name string) (duck.ChangingSubject, bool) {
		i := slices.IndexFunc(ro.Changing, func(c duck.ChangingSubject) bool { return c.Name == name })
		if i < 0 {
			return duck.ChangingSubject{}, false
		}
		return ro.Changing[i], true
	}
	superseded := func(name string) bool {
		c, ok := changing(name)
		return ok && c.Generation != in.generation
	}
	// A subject still changing to this generation waits for its rollout.
	todo := slices.DeleteFunc(slices.Clone(in.todo), func(w work) bool {
		_, ok := changing(w.name)
		return ok && !superseded(w.name)
	})
	slices.SortStableFunc(todo, func(a, b work) int { return boolOrder(!superseded(a.name), !superseded(b.name)) })
	limit := in.policy.max(in.total)
	reuse := 0
	for _, w := range todo {
		if superseded(w.name) {
			reuse++
		}
	}
	allowed := limit - len(ro.Changing) + min(reuse, limit)
	if allowed <= 0 || len(todo) == 0 {
		if len(ro.Changing) == 0 && len(todo) == 0 {
			return rolloutPlan{status: ro, done: true}
		}
		return rolloutPlan{status: ro, reason: ReasonRollingOut, retry: rolloutRecheck, message: progress(ro, len(todo))}
	}
	wave := todo[:min(allowed, len(todo))]
	ro.Wave++
	since := in.now.Truncate(time.Second)
	for i := range wave {
		wave[i].paced = &duck.Change{Generation: in.generation, Wave: ro.Wave, Since: since}
		wave[i].rollback = in.policy.Rollback
		ro.Changing = append(ro.Changing, duck.ChangingSubject{Name: wave[i].name, Since: metav1.NewTime(since), Generation: in.generation})
	}
	ro.Changing = slices.CompactFunc(sortedChanging(ro.Changing), func(a, b duck.ChangingSubject) bool { return a.Name == b.Name })
	ro.Waiting = waiting(todo[len(wave):], ro.Changing)
	return rolloutPlan{status: ro, wave: wave, reason: ReasonRollingOut, retry: rolloutRecheck, message: progress(ro, len(todo)-len(wave))}
}

// pausedPlan is a paused rollout: no wave; the waves in flight are looked
// at again until they are done, since a deadline passes without an event.
func pausedPlan(in rolloutInput, ro *duck.RolloutStatus) rolloutPlan {
	left := 0
	for _, w := range in.todo {
		if !slices.ContainsFunc(ro.Changing, func(c duck.ChangingSubject) bool { return c.Name == w.name && c.Generation == in.generation }) {
			left++
		}
	}
	what := "rollout of generation " + strconv.FormatInt(in.generation, 10)
	if in.undoneFrom > 0 {
		what = fmt.Sprintf("undo of generation %d (restoring %d)", in.undoneFrom, in.generation)
	}
	records := ""
	if n := len(in.recordsOnly); n > 0 {
		records = fmt.Sprintf(" (and %d whose records only change, at once)", n)
	}
	var msg string
	if ro.Wave == 0 && len(ro.Changing) == 0 {
		msg = fmt.Sprintf("%s paused before its first wave: %d of %d subjects to change%s; status.plan says how", what, left, ro.Total, records)
	} else {
		msg = fmt.Sprintf("%s paused after wave %d: %d of %d subjects updated, %d changing, %d to go%s", what, ro.Wave, ro.Updated, ro.Total, len(ro.Changing), left, records)
	}
	p := rolloutPlan{status: ro, reason: ReasonRolloutPaused, message: msg + "; remove " + RolloutPausedAnnotation + " to resume"}
	if len(ro.Changing) > 0 {
		p.retry = rolloutRecheck
	}
	return p
}

// planWaves are the first maxWaves waves decideRollout would take from
// in if each wave rolled out as soon as it started and nothing else
// changed (each its subjects' names), the number of the first, and how
// many more would follow. What is in flight now keeps its slots for the
// first wave; a halted rollout plans none.
func planWaves(in rolloutInput, maxWaves int) (waves [][]string, first, more int) {
	in.paused, in.quietWait = false, 0
	for len(in.todo) > 0 && len(waves) < maxWaves {
		p := decideRollout(in)
		if len(p.wave) == 0 {
			return waves, first, 0
		}
		if first == 0 {
			first = p.status.Wave
		}
		names := make([]string, len(p.wave))
		planned := make(map[string]bool, len(p.wave))
		for i, w := range p.wave {
			names[i], planned[w.name] = w.name, true
		}
		waves = append(waves, names)
		in.todo = slices.DeleteFunc(slices.Clone(in.todo), func(w work) bool { return planned[w.name] })
		in.inForce += len(names)
		in.changed = nil
		in.prev = &duck.RolloutStatus{Generation: in.generation, Wave: p.status.Wave, Total: in.total}
	}
	if n := in.policy.max(in.total); len(in.todo) > 0 {
		more = (len(in.todo) + n - 1) / n
	}
	return waves, first, more
}

// sortedChanging sorts by name, the newest entry of a name first (a
// subject patched again keeps its newest change).
func sortedChanging(cs []duck.ChangingSubject) []duck.ChangingSubject {
	slices.SortStableFunc(cs, func(a, b duck.ChangingSubject) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		switch {
		case a.Generation > b.Generation:
			return -1
		case a.Generation < b.Generation:
			return 1
		}
		return b.Since.Compare(a.Since.Time)
	})
	return cs
}

// waiting names, sorted and at most duck.MaxWaiting, the subjects todo
// binds that are not changing.
func waiting(todo []work, changing []duck.ChangingSubject) []string {
	var out []string
	for _, w := range todo {
		if w.bind && !slices.ContainsFunc(changing, func(c duck.ChangingSubject) bool { return c.Name == w.name }) {
			out = append(out, w.name)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), duck.MaxWaiting)]
}

// boolOrder orders false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// progress says how far the rollout is.
func progress(ro *duck.RolloutStatus, left int) string {
	what := fmt.Sprintf("rolling out generation %d", ro.Generation)
	if ro.UndoneFrom > 0 {
		what = fmt.Sprintf("undoing generation %d, restoring generation %d", ro.UndoneFrom, ro.Generation)
	}
	return fmt.Sprintf("%s: %d of %d subjects updated, %d changing, %d to go, wave %d",
		what, ro.Updated, ro.Total, len(ro.Changing), left, ro.Wave)
}
