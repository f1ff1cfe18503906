package psbinding

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/duck"
)

// TestObservedFromJSONReadsAsFromObject checks that a subject listed as
// JSON (a duck.RawList item, without apiVersion and kind) gives the pod
// template, the deletion state and the object that the same
// subject read as an unstructured object (a GET) gives, templates that are
// absent or of the wrong type included.
func TestObservedFromJSONReadsAsFromObject(t *testing.T) {
	deployment := `{"metadata":{"name":"web","namespace":"ns","resourceVersion":"7","labels":{"app":"web"},"annotations":{"a":"b"}%s},
		"spec":{"replicas":2,"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"app:1","env":[{"name":"A","value":"1"}]}]}}}}`
	for _, tc := range []struct {
		name  string
		shape duck.Shape
		json  string
	}{
		{"a Deployment", duck.PodSpecable(), fmt.Sprintf(deployment, "")},
		{"a Deployment being deleted", duck.PodSpecable(), fmt.Sprintf(deployment, `,"deletionTimestamp":"2026-11-27T10:00:00Z"`)},
		{"a Pod", duck.Pod(), `{"metadata":{"name":"p","labels":{"x":"y"}},"spec":{"containers":[{"name":"app","image":"app:1"}]}}`},
		{"a CronJob", duck.CronJob(), `{"metadata":{"name":"c"},"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"app"}]}}}}}}`},
		{"no template", duck.PodSpecable(), `{"metadata":{"name":"w"},"spec":{}}`},
		{"a template that is a string", duck.PodSpecable(), `{"metadata":{"name":"w"},"spec":{"template":"x"}}`},
		{"containers that are a string", duck.PodSpecable(), `{"metadata":{"name":"w"},"spec":{"template":{"spec":{"containers":"x"}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(tc.json), &obj); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetAPIVersion("apps/v1")
			u.SetKind("Deployment")
			fromObject := &observed{u: u}
			fromJSON := &observed{raw: []byte(tc.json), apiVersion: "apps/v1", kind: "Deployment"}

			want, wantErr := fromObject.pod(tc.shape)
			got, err := fromJSON.pod(tc.shape)
			if (err != nil) != (wantErr != nil) || errors.Is(err, duck.ErrNoPodTemplate) != errors.Is(wantErr, duck.ErrNoPodTemplate) {
				t.Fatalf("pod: %v, from the object: %v", err, wantErr)
			}
			if want != nil {
				want.ManagedFields = nil // Decode skips them, as the informers do
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod (-from the object +from JSON):\n%s", diff)
			}
			if fromJSON.deleting(got) != fromObject.deleting(want) {
				t.Errorf("deleting: %v, from the object %v", fromJSON.deleting(got), fromObject.deleting(want))
			}
			gotObj, err := fromJSON.object()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(u, gotObj); diff != "" {
				t.Errorf("object (-from the object +from JSON):\n%s", diff)
			}
		})
	}
}
