package duck

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
)

func guardFixture(t *testing.T) map[string]any {
	t.Helper()
	var obj map[string]any
	err := json.Unmarshal([]byte(`{
		"metadata": {"name": "web", "resourceVersion": "7", "labels": {"app": "web"}},
		"spec": {"replicas": 3, "template": {"spec": {
			"containers": [
				{"name": "app", "image": "app:1", "env": [{"name": "A", "value": ""}]},
				{"name": "side", "image": "side:1"}
			],
			"volumes": [{"name": "data", "emptyDir": {}}]
		}}}
	}`), &obj)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestGuard(t *testing.T) {
	tests := []struct {
		name string
		ops  []jsonpatch.Operation
		want []jsonpatch.Operation // the tests Guard puts first
	}{{
		name: "replace tests the old value and the identity of the element",
		ops:  []jsonpatch.Operation{{Operation: "replace", Path: "/spec/template/spec/containers/0/image", Value: "app:2"}},
		want: []jsonpatch.Operation{
			{Operation: "test", Path: "/spec/template/spec/containers/0/name", Value: "app"},
			{Operation: "test", Path: "/spec/template/spec/containers/0/image", Value: "app:1"},
		},
	}, {
		name: "add into a list tests the list",
		ops:  []jsonpatch.Operation{{Operation: "add", Path: "/spec/template/spec/volumes/1", Value: map[string]any{"name": "token"}}},
		want: []jsonpatch.Operation{
			{Operation: "test", Path: "/spec/template/spec/volumes", Value: []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}}},
		},
	}, {
		name: "add of an absent member tests its absence",
		ops: []jsonpatch.Operation{
			{Operation: "add", Path: "/spec/template/spec/containers/1/volumeMounts", Value: []any{}},
			{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{"a": "b"}},
		},
		want: []jsonpatch.Operation{
			{Operation: "test", Path: "/spec/template/spec/containers/1/name", Value: "side"},
			{Operation: "test", Path: "/spec/template/spec/containers/1/volumeMounts"},
			{Operation: "test", Path: "/metadata/annotations"},
		},
	}, {
		name: "add of a present member tests its value; an escaped key round-trips",
		ops:  []jsonpatch.Operation{{Operation: "add", Path: "/metadata/labels/app", Value: "api"}},
		want: []jsonpatch.Operation{{Operation: "test", Path: "/metadata/labels/app", Value: "web"}},
	}, {
		name: "remove of an empty value keeps the empty value; each path is tested once",
		ops: []jsonpatch.Operation{
			{Operation: "remove", Path: "/spec/template/spec/containers/0/env/0"},
			{Operation: "add", Path: "/spec/template/spec/containers/0/env/0", Value: map[string]any{"name": "B"}},
		},
		want: []jsonpatch.Operation{
			{Operation: "test", Path: "/spec/template/spec/containers/0/name", Value: "app"},
			{Operation: "test", Path: "/spec/template/spec/containers/0/env/0", Value: map[string]any{"name": "A", "value": ""}},
			{Operation: "test", Path: "/spec/template/spec/containers/0/env", Value: []any{map[string]any{"name": "A", "value": ""}}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Guard(guardFixture(t), tc.ops)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]jsonpatch.Operation(nil), tc.want...), tc.ops...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Guard (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGuardRefusesAPatchOfAnotherObject(t *testing.T) {
	for _, op := range []jsonpatch.Operation{
		{Operation: "replace", Path: "/spec/template/spec/containers/5/image", Value: "x"},
		{Operation: "remove", Path: "/metadata/annotations/x"},
		{Operation: "add", Path: "/spec/nothing/here", Value: 1},
		{Operation: "move", Path: "/spec/replicas"},
		{Operation: "add", Path: "no-slash", Value: 1},
	} {
		if _, err := Guard(guardFixture(t), []jsonpatch.Operation{op}); err == nil {
			t.Errorf("Guard(%s %s) = nil error", op.Operation, op.Path)
		}
	}
}

func TestMarshalPatchKeepsEmptyValues(t *testing.T) {
	got, err := MarshalPatch([]jsonpatch.Operation{
		{Operation: "test", Path: "/a", Value: ""},
		{Operation: "test", Path: "/b"},
		{Operation: "replace", Path: "/c", Value: false},
		{Operation: "add", Path: "/d", Value: nil},
		{Operation: "remove", Path: "/e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"test","path":"/a","value":""},{"op":"test","path":"/b"},{"op":"replace","path":"/c","value":false},{"op":"add","path":"/d","value":null},{"op":"remove","path":"/e"}]`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("MarshalPatch (-want +got):\n%s", diff)
	}
	if strings.Contains(string(got), `"path":"/b","value"`) {
		t.Error("absence test carries a value")
	}
}
