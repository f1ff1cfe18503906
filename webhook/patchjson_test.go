package webhook

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestEncodePatchIsJSONMarshal checks that PatchResponse's encoder writes
// what encoding/json writes for the same operations, byte for byte.
func TestEncodePatchIsJSONMarshal(t *testing.T) {
	var nilEnv *corev1.EnvVar
	tests := []struct {
		name string
		ops  []jsonpatch.JsonPatchOperation
	}{
		{"one add", []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/labels/a", Value: "b"}}},
		{"remove without value", []jsonpatch.JsonPatchOperation{{Operation: "remove", Path: "/spec/template/spec/volumes/2"}}},
		{"add and replace of nil write null", []jsonpatch.JsonPatchOperation{
			{Operation: "add", Path: "/a"}, {Operation: "replace", Path: "/b"}, {Operation: "test", Path: "/c"},
		}},
		{"typed nil is a value", []jsonpatch.JsonPatchOperation{{Operation: "remove", Path: "/a", Value: nilEnv}}},
		{"empty values are kept", []jsonpatch.JsonPatchOperation{
			{Operation: "add", Path: "/a", Value: ""}, {Operation: "replace", Path: "/b", Value: 0}, {Operation: "add", Path: "/c", Value: false},
		}},
		{"escaped paths and values", []jsonpatch.JsonPatchOperation{
			{Operation: "add", Path: "/metadata/annotations/bindings.bindkit.dev~1bound", Value: `{"a":"<b>&"}`},
			{Operation: "add", Path: "/metadata/labels/\"q\"\\<&>\u2028é\x01", Value: "\xff invalid UTF-8"},
			{Operation: "rep\tlace", Path: "/x", Value: map[string]string{"z": "1", "a": "<"}},
		}},
		{"pod spec values", []jsonpatch.JsonPatchOperation{
			{Operation: "add", Path: "/spec/template/spec/containers/0/env/-", Value: corev1.EnvVar{Name: "A", Value: "b"}},
			{Operation: "add", Path: "/spec/template/spec/volumes/1", Value: corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "s"},
			}}},
			{Operation: "replace", Path: "/spec/template/spec/containers/0/resources/limits/cpu", Value: resource.MustParse("250m")},
			{Operation: "add", Path: "/spec/template/spec/containers/1", Value: &corev1.Container{Name: "c", Args: []string{"--a=<b>"}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.ops)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodePatch(tc.ops)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("encodePatch differs from json.Marshal (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncodePatchError checks that a value encoding/json cannot encode is
// an error, as it is from json.Marshal, and PatchResponse answers 500.
func TestEncodePatchError(t *testing.T) {
	ops := []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/a", Value: math.NaN()}}
	if _, err := encodePatch(ops); err == nil {
		t.Fatal("encodePatch of NaN: no error")
	}
	if resp := PatchResponse(ops); resp.Allowed || resp.Result == nil || resp.Result.Code != 500 {
		t.Fatalf("PatchResponse of NaN = %+v, want a 500", resp)
	}
}

// FuzzEncodePatch checks the encoder against json.Marshal on arbitrary
// operation names, paths and string values, with and without a value and
// with a value of a pod spec type. Seeds live in testdata/fuzz/FuzzEncodePatch.
func FuzzEncodePatch(f *testing.F) {
	f.Add("add", "/metadata/labels/a", "b", uint8(0))
	f.Add("remove", "/spec/x~1y", "", uint8(1))
	f.Add("replace", "/a/<&>", "\u2028\x00\xff", uint8(2))
	f.Fuzz(func(t *testing.T, op, path, value string, kind uint8) {
		var v any
		switch kind % 4 {
		case 0:
			v = value
		case 1:
			v = nil
		case 2:
			v = corev1.EnvVar{Name: value, Value: path}
		case 3:
			v = map[string]string{value: op, path: value}
		}
		ops := []jsonpatch.JsonPatchOperation{{Operation: op, Path: path, Value: v}, {Operation: "remove", Path: value}}
		want, wantErr := json.Marshal(ops)
		got, err := encodePatch(ops)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("encodePatch error %v, json.Marshal error %v", err, wantErr)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("encodePatch differs from json.Marshal (-want +got):\n%s", diff)
		}
	})
}
