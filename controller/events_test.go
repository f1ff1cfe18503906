package controller_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/controller/logging"
)

func TestNewEventRecorderWritesEventsWithFakeClientset(t *testing.T) {
	kube := fake.NewClientset()
	logger, logs := observed()
	ctx, cancel := context.WithCancel(logging.WithLogger(context.Background(), logger))
	defer cancel()
	recorder := controller.NewEventRecorder(ctx, kube, nil, "bindkit-test")

	subject := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	recorder.Eventf(subject, corev1.EventTypeNormal, "Bound", "bound by %s", "binding ns/gh")

	var events []corev1.Event
	eventually(t, "the Event in the API", func() bool {
		list, err := kube.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list Events: %v", err)
		}
		events = list.Items
		return len(events) > 0
	})
	type view struct{ Kind, Name, Type, Reason, Message, Component string }
	var got []view
	for _, e := range events {
		got = append(got, view{e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message, e.Source.Component})
	}
	want := []view{{"Pod", "web", "Normal", "Bound", "bound by binding ns/gh", "bindkit-test"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	eventually(t, "the event's log line", hasMessage(logs, "event"))
	if got := logs.FilterMessage("event").All()[0].ContextMap()["reason"]; got != "Bound" {
		t.Errorf("logged reason = %v, want Bound", got)
	}
}
