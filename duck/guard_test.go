package duck

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	kjson "sigs.k8s.io/json"
)

// guardJSON is the object the Guard tests read, as the kube-apiserver
// might send it (white space included).
const guardJSON = `{
		"metadata": {"name": "web", "resourceVersion": "7", "labels": {"app": "web"}},
		"spec": {"replicas": 3, "template": {"spec": {
			"containers": [
				{"name": "app", "image": "app:1", "env": [{"name": "A", "value": ""}]},
				{"name": "side", "image": "side:1"}
			],
			"volumes": [{"name": "data", "emptyDir": {}}]
		}}}
	}`

// guardFixture is guardJSON as the dynamic client decodes it.
func guardFixture(t *testing.T) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(guardJSON), &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// guards are Guard and GuardJSON, each given guardJSON.
func guards(t *testing.T) map[string]func([]jsonpatch.Operation) ([]jsonpatch.Operation, error) {
	return map[string]func([]jsonpatch.Operation) ([]jsonpatch.Operation, error){
		"Guard": func(ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) { return Guard(guardFixture(t), ops) },
		"GuardJSON": func(ops []jsonpatch.Operation) ([]jsonpatch.Operation, error) {
			guarded, err := GuardJSON([]byte(guardJSON), ops)
			return decodedValues(t, guarded), err
		},
	}
}

// decodedValues returns ops with each json.RawMessage value decoded as
// the dynamic client decodes JSON.
func decodedValues(t testing.TB, ops []jsonpatch.Operation) []jsonpatch.Operation {
	t.Helper()
	out := slices.Clone(ops)
	for i, op := range out {
		if raw, ok := op.Value.(json.RawMessage); ok {
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &out[i].Value); err != nil {
				t.Fatalf("%s %s: value %s: %v", op.Operation, op.Path, raw, err)
			}
		}
	}
	return out
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
		for name, guard := range guards(t) {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				got, err := guard(tc.ops)
				if err != nil {
					t.Fatal(err)
				}
				want := append(append([]jsonpatch.Operation(nil), tc.want...), tc.ops...)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", name, diff)
				}
			})
		}
	}
}

func TestGuardRefusesAPatchOfAnotherObject(t *testing.T) {
	for _, op := range []jsonpatch.Operation{
		{Operation: "replace", Path: "/spec/template/spec/containers/5/image", Value: "x"},
		{Operation: "remove", Path: "/metadata/annotations/x"},
		{Operation: "add", Path: "/spec/nothing/here", Value: 1},
		{Operation: "move", Path: "/spec/replicas"},
		{Operation: "add", Path: "no-slash", Value: 1},
		{Operation: "add", Path: "/spec/replicas/x", Value: 1},
		{Operation: "replace", Path: "/spec/template/spec/containers/01/image", Value: "x"},
		{Operation: "replace", Path: "/spec/template/spec/containers/-1/image", Value: "x"},
	} {
		for name, guard := range guards(t) {
			if _, err := guard([]jsonpatch.Operation{op}); err == nil {
				t.Errorf("%s(%s %s) = nil error", name, op.Operation, op.Path)
			}
		}
	}
}

// FuzzGuardJSONAsGuard: GuardJSON of an object's JSON (compact or
// indented, as encoding/json writes it, so with no key twice, as the
// kube-apiserver writes it) guards two operations as Guard does the object
// the dynamic client decodes, or both refuse it.
func FuzzGuardJSONAsGuard(f *testing.F) {
	f.Add([]byte(guardJSON), "/spec/template/spec/containers/0/env/1", "/spec/template/spec/containers/0/image", uint8(0), false)
	f.Add([]byte(guardJSON), "/spec/template/spec/volumes/0", "/spec/template/spec/volumes/0/name", uint8(1), true)
	f.Add([]byte(guardJSON), "/metadata/labels/app", "/metadata/labels", uint8(2), false)
	f.Add([]byte(`{"a~b":{"c/d":[1,2.5,"x\u003c",null,true,{"name":"n"}]}}`), "/a~0b/c~1d/5/name", "/a~0b/c~1d/1", uint8(1), true)
	f.Fuzz(func(t *testing.T, doc []byte, path, path2 string, op uint8, indent bool) {
		var obj map[string]any
		if kjson.UnmarshalCaseSensitivePreserveInts(doc, &obj) != nil || obj == nil {
			return
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return
		}
		if indent {
			var b bytes.Buffer
			if err := json.Indent(&b, raw, " ", "\t"); err != nil {
				t.Fatal(err)
			}
			raw = b.Bytes()
		}
		kinds := []string{"add", "replace", "remove"}
		ops := []jsonpatch.Operation{{Operation: kinds[op%3], Path: path, Value: "v"}, {Operation: kinds[op/3%3], Path: path2, Value: "w"}}
		want, wantErr := Guard(obj, ops)
		got, gotErr := GuardJSON(raw, ops)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("Guard: %v, GuardJSON: %v (%s)", wantErr, gotErr, raw)
		}
		if gotErr == nil {
			// What the kube-apiserver is sent.
			if _, err := MarshalPatch(got); err != nil {
				t.Fatalf("MarshalPatch of GuardJSON's operations: %v", err)
			}
		}
		got = decodedValues(t, got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GuardJSON (-Guard +GuardJSON) of %s:\n%s", raw, diff)
		}
	})
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
