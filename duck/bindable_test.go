package duck_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
)

func TestStatus(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason, message string, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: gen}
	}
	tests := []struct {
		name      string
		steps     func(s duck.BindableStatus)
		want      []metav1.Condition
		wantReady bool
	}{{
		name:  "initialized",
		steps: func(s duck.BindableStatus) { s.InitializeConditions() },
		want: []metav1.Condition{
			cond(duck.ConditionBindingAvailable, metav1.ConditionUnknown, duck.ReasonInitializing, "", 0),
			cond(duck.ConditionReady, metav1.ConditionUnknown, duck.ReasonInitializing, "", 0),
		},
	}, {
		name: "available",
		steps: func(s duck.BindableStatus) {
			s.InitializeConditions()
			s.SetObservedGeneration(3)
			s.MarkBindingAvailable()
		},
		want: []metav1.Condition{
			cond(duck.ConditionBindingAvailable, metav1.ConditionTrue, duck.ReasonBindingAvailable, "", 3),
			cond(duck.ConditionReady, metav1.ConditionTrue, duck.ReasonBindingAvailable, "", 3),
		},
		wantReady: true,
	}, {
		name: "initialize keeps what is set",
		steps: func(s duck.BindableStatus) {
			s.MarkBindingAvailable()
			s.InitializeConditions()
		},
		want: []metav1.Condition{
			cond(duck.ConditionBindingAvailable, metav1.ConditionTrue, duck.ReasonBindingAvailable, "", 0),
			cond(duck.ConditionReady, metav1.ConditionTrue, duck.ReasonBindingAvailable, "", 0),
		},
		wantReady: true,
	}, {
		name: "unavailable after available",
		steps: func(s duck.BindableStatus) {
			s.MarkBindingAvailable()
			s.SetObservedGeneration(2)
			s.MarkBindingUnavailable("SubjectMissing", "deployment web not found")
		},
		want: []metav1.Condition{
			cond(duck.ConditionBindingAvailable, metav1.ConditionFalse, "SubjectMissing", "deployment web not found", 2),
			cond(duck.ConditionReady, metav1.ConditionFalse, "SubjectMissing", "deployment web not found", 2),
		},
	}, {
		name:  "unavailable without a reason",
		steps: func(s duck.BindableStatus) { s.MarkBindingUnavailable("", "") },
		want: []metav1.Condition{
			cond(duck.ConditionBindingAvailable, metav1.ConditionFalse, duck.ReasonBindingUnavailable, "", 0),
			cond(duck.ConditionReady, metav1.ConditionFalse, duck.ReasonBindingUnavailable, "", 0),
		},
	}, {
		name: "ready for an older generation is not ready",
		steps: func(s duck.BindableStatus) {
			s.MarkBindingAvailable()
			s.SetObservedGeneration(5)
		},
		want: []metav1.Condition{
			cond(duck.ConditionBindingAvailable, metav1.ConditionTrue, duck.ReasonBindingAvailable, "", 0),
			cond(duck.ConditionReady, metav1.ConditionTrue, duck.ReasonBindingAvailable, "", 0),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s duck.Status
			tt.steps(&s)
			if diff := cmp.Diff(tt.want, s.GetConditions(), cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for _, c := range s.GetConditions() {
				if c.LastTransitionTime.IsZero() {
					t.Errorf("condition %s has no LastTransitionTime", c.Type)
				}
			}
			if got := s.IsReady(); got != tt.wantReady {
				t.Errorf("IsReady() = %v, want %v", got, tt.wantReady)
			}
			c := s.DeepCopy()
			c.Conditions[0].Message = "changed"
			if s.Conditions[0].Message == "changed" {
				t.Error("DeepCopy shares conditions with the original")
			}
		})
	}
}
