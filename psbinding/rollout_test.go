package psbinding

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/duck"
)

// TestRolloutPolicyFromAnnotations checks how a Binding's annotations
// override the kind's default policy, and that a bad one is an error
// naming it.
func TestRolloutPolicyFromAnnotations(t *testing.T) {
	def := &RolloutPolicy{MaxChanging: intstr.FromString("25%"), Deadline: time.Minute}
	for _, tc := range []struct {
		name        string
		def         *RolloutPolicy
		annotations map[string]string
		want        RolloutPolicy
		enabled     bool
		max100      int
		wantErr     string
	}{
		{name: "no policy", want: RolloutPolicy{Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "kind default", def: def, enabled: true, max100: 25,
			want: RolloutPolicy{MaxChanging: intstr.FromString("25%"), Deadline: time.Minute, Quiet: DefaultRolloutQuiet}},
		{name: "annotations", annotations: map[string]string{RolloutMaxChangingAnnotation: " 10 ", RolloutDeadlineAnnotation: "90s", RolloutRollbackAnnotation: "true"},
			enabled: true, max100: 10, want: RolloutPolicy{MaxChanging: intstr.FromInt32(10), Deadline: 90 * time.Second, Rollback: true, Quiet: DefaultRolloutQuiet}},
		{name: "off overrides the default", def: def, annotations: map[string]string{RolloutMaxChangingAnnotation: "off"},
			want: RolloutPolicy{Deadline: time.Minute, Quiet: DefaultRolloutQuiet}},
		{name: "a percentage rounds up, at least one", annotations: map[string]string{RolloutMaxChangingAnnotation: "1%"}, enabled: true, max100: 1,
			want: RolloutPolicy{MaxChanging: intstr.FromString("1%"), Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "bad count", annotations: map[string]string{RolloutMaxChangingAnnotation: "ten"}, wantErr: `annotation rollout.bindings.bindkit.dev/max-changing "ten"`},
		{name: "bad deadline", annotations: map[string]string{RolloutDeadlineAnnotation: "-1m"}, wantErr: `annotation rollout.bindings.bindkit.dev/deadline "-1m"`},
		{name: "bad rollback", annotations: map[string]string{RolloutRollbackAnnotation: "yes please"}, wantErr: `annotation rollout.bindings.bindkit.dev/rollback "yes please"`},
		{name: "bad percentage", annotations: map[string]string{RolloutMaxChangingAnnotation: "x%"}, wantErr: `MaxChanging "x%"`},
		{name: "paused without a policy: one wave of every subject", annotations: map[string]string{RolloutPausedAnnotation: "true"}, enabled: true, max100: 100,
			want: RolloutPolicy{MaxChanging: intstr.FromString("100%"), Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "paused under a policy keeps it", def: def, annotations: map[string]string{RolloutPausedAnnotation: " true "}, enabled: true, max100: 25,
			want: RolloutPolicy{MaxChanging: intstr.FromString("25%"), Deadline: time.Minute, Quiet: DefaultRolloutQuiet}},
		{name: "paused, with off", annotations: map[string]string{RolloutPausedAnnotation: "true", RolloutMaxChangingAnnotation: "off"}, enabled: true, max100: 100,
			want: RolloutPolicy{MaxChanging: intstr.FromString("100%"), Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "not paused", annotations: map[string]string{RolloutPausedAnnotation: "false"}, want: RolloutPolicy{Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "an undo of this generation", annotations: map[string]string{RolloutUndoAnnotation: "0"}, enabled: true, max100: 100,
			want: RolloutPolicy{MaxChanging: intstr.FromString("100%"), Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "an undo of another generation", annotations: map[string]string{RolloutUndoAnnotation: "4"}, want: RolloutPolicy{Deadline: DefaultRolloutDeadline, Quiet: DefaultRolloutQuiet}},
		{name: "bad pause", annotations: map[string]string{RolloutPausedAnnotation: "yes"}, wantErr: `annotation rollout.bindings.bindkit.dev/paused "yes": want true or false`},
		{name: "bad undo", annotations: map[string]string{RolloutUndoAnnotation: "last"}, wantErr: `annotation rollout.bindings.bindkit.dev/undo "last": want the generation to undo`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &envBinding{}
			b.SetAnnotations(tc.annotations)
			s := Settings{Rollout: tc.def}
			got, err := s.rolloutPolicy(b)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("rolloutPolicy error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			if got.Enabled() != tc.enabled || (tc.enabled && got.max(100) != tc.max100) {
				t.Errorf("enabled %v, max of 100 %d; want %v, %d", got.Enabled(), got.max(100), tc.enabled, tc.max100)
			}
		})
	}
}

// TestRolledOut reads the rollout of each workload kind from its status.
func TestRolledOut(t *testing.T) {
	obj := func(kind string, generation int64, spec, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": kind, "spec": spec, "status": status}}
		u.SetGeneration(generation)
		return u
	}
	one := map[string]any{"replicas": int64(1)}
	for _, tc := range []struct {
		name     string
		obj      *unstructured.Unstructured
		complete bool
		failed   string
	}{
		{"deployment rolled out", obj("Deployment", 2, one, map[string]any{"observedGeneration": int64(2), "replicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1)}), true, ""},
		{"deployment not observed yet", obj("Deployment", 3, one, map[string]any{"observedGeneration": int64(2), "replicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1)}), false, ""},
		{"deployment with an old pod left", obj("Deployment", 2, one, map[string]any{"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(1), "availableReplicas": int64(1)}), false, ""},
		{"deployment past its progress deadline", obj("Deployment", 2, one, map[string]any{"observedGeneration": int64(2),
			"conditions": []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}}}), false, "ProgressDeadlineExceeded"},
		{"statefulset mid-update", obj("StatefulSet", 2, one, map[string]any{"observedGeneration": int64(2), "updatedReplicas": int64(1), "readyReplicas": int64(1), "currentRevision": "a", "updateRevision": "b"}), false, ""},
		{"statefulset updated", obj("StatefulSet", 2, one, map[string]any{"observedGeneration": int64(2), "updatedReplicas": int64(1), "readyReplicas": int64(1), "currentRevision": "b", "updateRevision": "b"}), true, ""},
		{"daemonset updated", obj("DaemonSet", 2, nil, map[string]any{"observedGeneration": int64(2), "desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(3), "numberAvailable": int64(3)}), true, ""},
		{"daemonset mid-update", obj("DaemonSet", 2, nil, map[string]any{"observedGeneration": int64(2), "desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(2), "numberAvailable": int64(3)}), false, ""},
		{"a kind without a rollout status", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "CronJob"}}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			complete, failed := RolledOut(tc.obj)
			if complete != tc.complete || failed != tc.failed {
				t.Errorf("RolledOut = %v, %q; want %v, %q", complete, failed, tc.complete, tc.failed)
			}
		})
	}
}

// TestAdmissionDuringRollout checks what the webhook applies to a subject
// while its Binding rolls out under a policy: one at the Binding's
// generation gets it; one at an earlier generation waits for its wave; one
// that does not record the Binding (a new one) gets it only once the
// rollout is complete; one rolled back from this generation is held;
// without a policy nothing waits; a bare Pod never waits but for a hold; a
// predecessor's record (another UID) is not the Binding's.
func TestAdmissionDuringRollout(t *testing.T) {
	by := duck.BoundBy{Resource: schemaGR("envbindings", "test.bindkit.dev"), Name: "env", UID: "u1"}
	paced := &RolloutPolicy{MaxChanging: intstr.FromInt32(1)}
	complete := &duck.RolloutStatus{Generation: 3, Updated: 2, Total: 2}
	inProgress := &duck.RolloutStatus{Generation: 3, Updated: 1, Total: 2, Changing: []duck.ChangingSubject{{Name: "a", Generation: 3}}}
	halted := &duck.RolloutStatus{Generation: 3, Updated: 1, Total: 2, Halted: []string{"a"}}
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	pod := schema.GroupKind{Kind: "Pod"}
	for _, tc := range []struct {
		name        string
		policy      *RolloutPolicy
		rollout     *duck.RolloutStatus
		kind        schema.GroupKind
		annotations map[string]string
		want        bool
	}{
		{"new subject, rollout complete", paced, complete, deployment, nil, false},
		{"new subject, rollout in progress", paced, inProgress, deployment, nil, true},
		{"new subject, rollout halted", paced, halted, deployment, nil, true},
		{"new subject, no rollout reported yet", paced, nil, deployment, nil, true},
		{"new subject, a complete rollout of an earlier generation", paced, &duck.RolloutStatus{Generation: 2}, deployment, nil, true},
		{"new bare Pod, rollout in progress", paced, inProgress, pod, nil, false},
		{"at the generation", paced, inProgress, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:3"}, false},
		{"at an earlier generation", paced, inProgress, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:2"}, true},
		{"at an earlier generation, recorded before UIDs", paced, inProgress, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env:2"}, true},
		{"a predecessor's record, rollout complete", paced, complete, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u0:7"}, false},
		{"earlier, no policy", nil, nil, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:2"}, false},
		{"new subject, no policy", nil, nil, deployment, nil, false},
		{"held at this generation", nil, nil, deployment, map[string]string{HeldAnnotation: "envbindings.test.bindkit.dev/env@u1:3"}, true},
		{"held at this generation, a bare Pod", paced, complete, pod, map[string]string{HeldAnnotation: "envbindings.test.bindkit.dev/env@u1:3"}, true},
		{"held at an earlier generation", nil, nil, deployment, map[string]string{HeldAnnotation: "envbindings.test.bindkit.dev/env@u1:2"}, false},
		{"a predecessor held", nil, nil, deployment, map[string]string{HeldAnnotation: "envbindings.test.bindkit.dev/env@u0:3"}, false},
		{"new subject, paused, no policy", nil, nil, deployment, map[string]string{"paused": "true"}, true},
		{"new subject, paused, rollout complete", paced, complete, deployment, map[string]string{"paused": "true"}, true},
		{"at an earlier generation, paused, no policy", nil, nil, deployment, map[string]string{"paused": "true", duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:2"}, true},
		{"at the generation, paused", nil, nil, deployment, map[string]string{"paused": "true", duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:3"}, false},
		{"new bare Pod, paused", nil, nil, pod, map[string]string{"paused": "true"}, false},
		{"new subject, undone, rollout complete", paced, complete, deployment, map[string]string{"undo": "3"}, true},
		{"at the restored generation, undone", nil, nil, deployment, map[string]string{"undo": "3", duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:1"}, true},
		{"new subject, an undo of another generation", nil, nil, deployment, map[string]string{"undo": "2"}, false},
		// A newer bindkit's record of the Binding: left alone (duck.RecordFormat).
		{"a newer format's record, no policy", nil, nil, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u1:v2;3"}, true},
		{"a newer format's record, a bare Pod", paced, complete, pod, map[string]string{duck.RolloutAnnotation: "envbindings.test.bindkit.dev/env@u1:v2;3;1;1"}, true},
		{"a predecessor's newer record", nil, nil, deployment, map[string]string{duck.BoundAnnotation: "envbindings.test.bindkit.dev/env@u0:v2;3"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &envBinding{}
			b.SetGeneration(3)
			b.SetUID("u1")
			b.Status.Rollout = tc.rollout
			// The Binding's controls, given here with the subject's annotations.
			controls := map[string]string{}
			if v, ok := tc.annotations["paused"]; ok {
				controls[RolloutPausedAnnotation] = v
			}
			if v, ok := tc.annotations["undo"]; ok {
				controls[RolloutUndoAnnotation] = v
			}
			b.SetAnnotations(controls)
			a := &admitter{rollout: tc.policy}
			subject := &duck.WithPod{}
			subject.Annotations = tc.annotations
			if got := a.holdsBack(b, by, tc.kind, subject); got != tc.want {
				t.Errorf("holdsBack = %v, want %v", got, tc.want)
			}
		})
	}
}

func schemaGR(resource, group string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}
